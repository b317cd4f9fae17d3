/* resize.c — the folder data set's resampling: stb_image_resize (libstb-dev's
 * header, v0.97 in Debian 12, compiled here) on a box of a decoded image.
 *
 * Compiled here rather than taken from libstb's shared library: its one
 * allocation per call (STBIR_MALLOC) then comes from the sample's scratch
 * buffer (counted by the allocation wrappers, and reused from sample to
 * sample instead of a malloc and free per image), and the code gets this
 * build's optimisation. STB_IMAGE_RESIZE_STATIC keeps every stbir_ symbol
 * in this file. Its scalar loops are most of a JPEG sample's time;
 * docs/measurements.md (the folder loader) has the timings and the ways of
 * calling it that were measured, none faster per sample. */
#include <math.h>
#include "data/data_impl.h"

/* STBIR_MALLOC's context: the scratch buffer to hand out */
typedef struct resize_mem {
    void **buf;
    size_t *cap;
    vd_err *e;
    int rc;                     /* VD_ENOMEM when the buffer could not grow */
} resize_mem;

static void *resize_alloc(resize_mem *m, size_t n) {
    m->rc = vd_data_grow(m->buf, m->cap, n ? n : 1, m->e);
    return m->rc ? NULL : *m->buf;
}

#define STB_IMAGE_RESIZE_IMPLEMENTATION
#define STB_IMAGE_RESIZE_STATIC
#define STBIR_MALLOC(size, c) resize_alloc((resize_mem *)(c), (size))
#define STBIR_FREE(ptr, c) ((void)(ptr), (void)(c))   /* the buffer stays the scratch's */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"    /* the API functions not called here */
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#include <stb/stb_image_resize.h>
#pragma GCC diagnostic pop

int vd_image_resize(const unsigned char *px, int iw, int ih, int C, const vd_box *b,
                    unsigned char *out, int W, int H, void **work, size_t *work_cap, vd_err *e) {
    /* the whole pixels the box touches: stb reads only these (a sub-image
     * of px, its rows iw * C bytes apart), shifted so that the box's edge
     * falls on the output's first pixel edge */
    int x0 = (int)floor(b->x), y0 = (int)floor(b->y);
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x0 > iw - 1) x0 = iw - 1;
    if (y0 > ih - 1) y0 = ih - 1;
    int x1 = (int)ceil(b->x + b->w), y1 = (int)ceil(b->y + b->h);
    if (x1 > iw) x1 = iw;
    if (y1 > ih) y1 = ih;
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) y1 = y0 + 1;
    double sx = (double)W / b->w, sy = (double)H / b->h;
    /* per axis: area averaging (STBIR_FILTER_BOX, a trapezoid over each
     * output pixel's footprint: the anti-aliased shrink) where the box
     * shrinks, bilinear interpolation (STBIR_FILTER_TRIANGLE) where it
     * grows. Not the triangle filter for shrinking: stb 0.97 fails its own
     * assertion on the weights (total < 1.1) there. */
    stbir_filter fx = sx > 1 ? STBIR_FILTER_TRIANGLE : STBIR_FILTER_BOX;
    stbir_filter fy = sy > 1 ? STBIR_FILTER_TRIANGLE : STBIR_FILTER_BOX;
    resize_mem m = { work, work_cap, e, VD_OK };
    const unsigned char *sub = px + ((size_t)y0 * (size_t)iw + (size_t)x0) * (size_t)C;
    int ok = stbir_resize_subpixel(sub, x1 - x0, y1 - y0, iw * C, out, W, H, W * C,
                                   STBIR_TYPE_UINT8, C, STBIR_ALPHA_CHANNEL_NONE, 0,
                                   STBIR_EDGE_CLAMP, STBIR_EDGE_CLAMP, fx, fy,
                                   STBIR_COLORSPACE_LINEAR, &m, (float)sx, (float)sy,
                                   (float)((b->x - x0) * sx), (float)((b->y - y0) * sy));
    if (ok) return VD_OK;
    if (m.rc) return m.rc;
    return vd_errf(e, VD_EINTERNAL, "stb_image_resize refused a %dx%d box of a %dx%d image "
                   "for %dx%d", x1 - x0, y1 - y0, iw, ih, W, H);
}
