/* cuda_k_pool.cu — pooling forward and backward. */
#include "backend/cuda/cuda_kernels.h"

/* ---- pooling (PyTorch max_pool2d / avg_pool2d count_include_pad=True /
 * adaptive_{avg,max}_pool2d; global = adaptive to 1x1) ---------------------- */

/* Window of output index o along one dimension: [*lo, *hi) clamped to the
 * input, and the PyTorch avg divisor contribution (*span). */
__device__ __forceinline__ void pool_window(const cu_pool_geom &g, bool rows, int o, int *lo,
                                            int *hi, int *span) {
    int in = rows ? g.h : g.w, out = rows ? g.oh : g.ow;
    if (g.adaptive) {
        int a = (int)(((int64_t)o * in) / out);
        int b = (int)((((int64_t)(o + 1) * in) + out - 1) / out);
        *lo = a; *hi = b; *span = b - a;
        return;
    }
    int k = rows ? g.kh : g.kw, st = rows ? g.sh : g.sw, pd = rows ? g.ph : g.pw;
    int a = o * st - pd;
    int b = a + k < in + pd ? a + k : in + pd;
    *span = b - a;
    *lo = a > 0 ? a : 0;
    *hi = b < in ? b : in;
}

/* Range of outputs whose window may contain input index i (a superset for
 * adaptive; membership is re-checked by the caller). */
__device__ __forceinline__ void pool_outputs_of(const cu_pool_geom &g, bool rows, int i, int *o0,
                                                int *o1) {
    int in = rows ? g.h : g.w, out = rows ? g.oh : g.ow;
    int a, b;
    if (g.adaptive) {
        a = (int)(((int64_t)i * out) / in);
        b = (int)((((int64_t)(i + 1) * out) + in - 1) / in) - 1;
    } else {
        int k = rows ? g.kh : g.kw, st = rows ? g.sh : g.sw, pd = rows ? g.ph : g.pw;
        a = i + pd < k ? 0 : (i + pd - k) / st + 1;
        b = (i + pd) / st;
    }
    *o0 = a > 0 ? a : 0;
    *o1 = b < out - 1 ? b : out - 1;
}

/* Max over the window [h0, h1) x [w0, w1) of a plane of width w: value and
 * flat index in the plane (ih*w + iw), PyTorch's rule: the first maximum in
 * row-major order wins, a NaN always wins (so of several NaNs the last one);
 * an all -inf window gives its first element (the index's start value).
 * src holds the plane from row r0 and column c0 on, rows `pitch` apart:
 * window_max reads the plane itself, k_pool_bwd_tiled a copy of part of it
 * in shared memory -- the same values in the same order, so the same result. */
template <typename T>
__device__ __forceinline__ float window_max_at(const T *src, int pitch, int r0, int c0, int w,
                                               int h0, int h1, int w0, int w1, int *arg) {
    float m = -INFINITY;
    int idx = h0 * w + w0;
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
            float v = ld(src[(ih - r0) * pitch + (iw - c0)]);
            if (v > m || isnan(v)) { m = v; idx = ih * w + iw; }
        }
    *arg = idx;
    return m;
}

template <typename T>
__device__ __forceinline__ float window_max(const T *plane, int w, int h0, int h1, int w0,
                                            int w1, int *arg) {
    return window_max_at(plane, w, 0, 0, w, h0, h1, w0, w1, arg);
}

template <typename T, typename I>
__global__ void k_pool_fwd(cu_pool_geom g, const T *x, T *y, I total) {
    GRID_STRIDE_T(I, i, total) {
        I plane = i / ((I)g.ow * g.oh);
        int r = (int)(i - plane * ((I)g.ow * g.oh));
        int oh = r / g.ow, ow = r - oh * g.ow;
        const T *xp = x + plane * g.h * g.w;
        int h0, h1, sh, w0, w1, sw;
        pool_window(g, true, oh, &h0, &h1, &sh);
        pool_window(g, false, ow, &w0, &w1, &sw);
        if (h0 >= h1 || w0 >= w1) { st(&y[i], 0.0f); continue; }
        if (g.max) {
            int arg;
            st(&y[i], window_max(xp, g.w, h0, h1, w0, w1, &arg));
        } else {
            float acc = 0.0f;
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++) acc += ld(xp[ih * g.w + iw]);
            st(&y[i], acc / (float)(sh * sw));
        }
    }
}

/* Channels-last pooling (16-bit): output i = ((img*oh + oh)*ow + ow)*c + ch,
 * the window walked in the same row-major order with the same max rule (via
 * window_max_at with an element stride of c), so results equal the NCHW
 * kernels' on the same values. */
template <typename T>
__device__ __forceinline__ float window_max_nhwc(const T *plane, int w, int c, int h0, int h1,
                                                 int w0, int w1, int *arg) {
    float m = -INFINITY;
    int idx = h0 * w + w0;
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
            float v = ld(plane[(int64_t)(ih * w + iw) * c]);
            if (v > m || isnan(v)) { m = v; idx = ih * w + iw; }
        }
    *arg = idx;
    return m;
}

template <typename T>
__global__ void k_pool_fwd_nhwc(cu_pool_geom g, const T *x, T *y, int64_t total) {
    GRID_STRIDE(i, total) {
        int64_t pix = i / g.c;
        int ch = (int)(i - pix * g.c);
        int64_t img = pix / ((int64_t)g.oh * g.ow);
        int r = (int)(pix - img * ((int64_t)g.oh * g.ow));
        int oh = r / g.ow, ow = r - oh * g.ow;
        const T *xp = x + img * g.h * g.w * (int64_t)g.c + ch;
        int h0, h1, sh, w0, w1, sw;
        pool_window(g, true, oh, &h0, &h1, &sh);
        pool_window(g, false, ow, &w0, &w1, &sw);
        if (h0 >= h1 || w0 >= w1) { st(&y[i], 0.0f); continue; }
        if (g.max) {
            int arg;
            st(&y[i], window_max_nhwc(xp, g.w, g.c, h0, h1, w0, w1, &arg));
        } else {
            float acc = 0.0f;
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++) acc += ld(xp[(int64_t)(ih * g.w + iw) * g.c]);
            st(&y[i], acc / (float)(sh * sw));
        }
    }
}

/* k_pool_bwd in channels-last order: input i = ((img*h + ih)*w + iw)*c + ch. */
template <typename T>
__global__ void k_pool_bwd_nhwc(cu_pool_geom g, const T *x, const T *dy, T *dx, float beta,
                                int64_t total) {
    GRID_STRIDE(i, total) {
        int64_t pix = i / g.c;
        int ch = (int)(i - pix * g.c);
        int64_t img = pix / ((int64_t)g.h * g.w);
        int r = (int)(pix - img * ((int64_t)g.h * g.w));
        int ih = r / g.w, iw = r - ih * g.w;
        const T *xp = g.max ? x + img * g.h * g.w * (int64_t)g.c + ch : NULL;
        const T *dyp = dy + img * g.oh * g.ow * (int64_t)g.c + ch;
        int oh0, oh1, ow0, ow1;
        pool_outputs_of(g, true, ih, &oh0, &oh1);
        pool_outputs_of(g, false, iw, &ow0, &ow1);
        float acc = beta != 0.0f ? ld(dx[i]) : 0.0f;
        for (int oh = oh0; oh <= oh1; oh++) {
            int h0, h1, sh;
            pool_window(g, true, oh, &h0, &h1, &sh);
            if (ih < h0 || ih >= h1) continue;
            for (int ow = ow0; ow <= ow1; ow++) {
                int w0, w1, sw;
                pool_window(g, false, ow, &w0, &w1, &sw);
                if (iw < w0 || iw >= w1) continue;
                float d = ld(dyp[(int64_t)(oh * g.ow + ow) * g.c]);
                if (g.max) {
                    int arg;
                    window_max_nhwc(xp, g.w, g.c, h0, h1, w0, w1, &arg);
                    if (arg == ih * g.w + iw) acc += d;
                } else {
                    acc += d / (float)(sh * sw);
                }
            }
        }
        st(&dx[i], acc);
    }
}

/* ---- channels-last pooling on eight channels per thread (16-bit, c % 8 == 0)
 * Index q runs over (pixel, channel group of 8); I = int where the element
 * counts fit (FITS32), as the NCHW kernels. Per channel the same window walk,
 * max rule (first maximum in row-major order, NaN wins) and float sums as
 * k_pool_fwd_nhwc / k_pool_bwd_nhwc, so the results are the same bits.
 * Max-pool backward takes two passes: k_pool_arg8 stores each output's
 * argmax as its offset in the window ((ih - h0) * kw + (iw - w0), one byte;
 * 255 for an empty window) in the backward workspace, then k_pool_bwd8
 * gathers, per input, dy of the outputs whose argmax it is: x is read once
 * instead of once per covering window. */
template <typename I>
__device__ __forceinline__ void pool_q8(const cu_pool_geom &g, I q, I rows, I cols, I *img,
                                        int *r, int *col, int *c0) {
    I cg = (I)(g.c / 8);
    I pix = q / cg;
    *c0 = (int)(q - pix * cg) * 8;
    I t = pix / cols;
    *col = (int)(pix - t * cols);
    *img = t / rows;
    *r = (int)(t - *img * rows);
}

/* The max rule on eight channels over window [h0, h1) x [w0, w1) of xp:
 * m[k] the maximum, a[k] its offset in the window, (ih - h0) * kw + (iw - w0)
 * (0 and -inf for an empty window). Shared by forward and the argmax pass. */
template <typename I, typename H>
__device__ __forceinline__ void window_max8(const cu_pool_geom &g, const H *xp, int h0,
                                            int h1, int w0, int w1, float m[8], unsigned a[8]) {
#pragma unroll
    for (int k = 0; k < 8; k++) { m[k] = -INFINITY; a[k] = 0u; }
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
            bf8 v = ld8(xp + (I)(ih * g.w + iw) * g.c);
            unsigned rel = (unsigned)((ih - h0) * g.kw + (iw - w0));
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (v.v[k] > m[k] || isnan(v.v[k])) { m[k] = v.v[k]; a[k] = rel; }
        }
}

template <typename H, typename I>
__global__ void k_pool_fwd8(cu_pool_geom g, const H *x, H *y, I total) {
    GRID_STRIDE_T(I, q, total) {
        I img;
        int oh, ow, c0;
        pool_q8<I>(g, q, (I)g.oh, (I)g.ow, &img, &oh, &ow, &c0);
        int h0, h1, sh, w0, w1, sw;
        pool_window(g, true, oh, &h0, &h1, &sh);
        pool_window(g, false, ow, &w0, &w1, &sw);
        bf8 r;
        const H *xp = x + img * (I)g.h * g.w * g.c + c0;
        if (h0 >= h1 || w0 >= w1) {
#pragma unroll
            for (int k = 0; k < 8; k++) r.v[k] = 0.0f;
        } else if (g.max) {
            unsigned a[8];
            window_max8<I>(g, xp, h0, h1, w0, w1, r.v, a);
        } else {
#pragma unroll
            for (int k = 0; k < 8; k++) r.v[k] = 0.0f;
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++) {
                    bf8 v = ld8(xp + (I)(ih * g.w + iw) * g.c);
#pragma unroll
                    for (int k = 0; k < 8; k++) r.v[k] += v.v[k];
                }
#pragma unroll
            for (int k = 0; k < 8; k++) r.v[k] = r.v[k] / (float)(sh * sw);
        }
        st8(y + q * 8, r);
    }
}

template <typename H, typename I>
__global__ void k_pool_arg8(cu_pool_geom g, const H *x, uint8_t *arg, I total) {
    GRID_STRIDE_T(I, q, total) {
        I img;
        int oh, ow, c0;
        pool_q8<I>(g, q, (I)g.oh, (I)g.ow, &img, &oh, &ow, &c0);
        int h0, h1, sh, w0, w1, sw;
        pool_window(g, true, oh, &h0, &h1, &sh);
        pool_window(g, false, ow, &w0, &w1, &sw);
        const H *xp = x + img * (I)g.h * g.w * g.c + c0;
        float m[8];
        unsigned a[8];
        window_max8<I>(g, xp, h0, h1, w0, w1, m, a);
        if (h0 >= h1 || w0 >= w1) {   /* no input is its argmax */
#pragma unroll
            for (int k = 0; k < 8; k++) a[k] = 255u;
        }
        uint2 u;
        u.x = a[0] | a[1] << 8 | a[2] << 16 | a[3] << 24;
        u.y = a[4] | a[5] << 8 | a[6] << 16 | a[7] << 24;
        *(uint2 *)(void *)(arg + q * 8) = u;
    }
}

/* max (arg != NULL): dy of the covering outputs whose argmax is this input;
 * average: dy / divisor of every covering window. Output order as
 * k_pool_bwd_nhwc (rows, then columns, ascending). */
template <typename H, typename I>
__global__ void k_pool_bwd8(cu_pool_geom g, const uint8_t *arg, const H *dy, H *dx,
                            float beta, I total) {
    GRID_STRIDE_T(I, q, total) {
        I img;
        int ih, iw, c0;
        pool_q8<I>(g, q, (I)g.h, (I)g.w, &img, &ih, &iw, &c0);
        bf8 acc;
        if (beta != 0.0f) acc = ld8(dx + q * 8);
        else {
#pragma unroll
            for (int k = 0; k < 8; k++) acc.v[k] = 0.0f;
        }
        int oh0, oh1, ow0, ow1;
        pool_outputs_of(g, true, ih, &oh0, &oh1);
        pool_outputs_of(g, false, iw, &ow0, &ow1);
        I obase = img * (I)g.oh * g.ow;
        for (int oh = oh0; oh <= oh1; oh++) {
            int h0, h1, sh;
            pool_window(g, true, oh, &h0, &h1, &sh);
            if (ih < h0 || ih >= h1) continue;
            for (int ow = ow0; ow <= ow1; ow++) {
                int w0, w1, sw;
                pool_window(g, false, ow, &w0, &w1, &sw);
                if (iw < w0 || iw >= w1) continue;
                I o = ((obase + (I)(oh * g.ow + ow)) * g.c + c0);
                bf8 d = ld8(dy + o);
                if (arg) {
                    uint2 u = *(const uint2 *)(const void *)(arg + o);
                    unsigned rel = (unsigned)((ih - h0) * g.kw + (iw - w0));
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        unsigned b = ((k < 4 ? u.x : u.y) >> (8 * (k & 3))) & 0xffu;
                        if (b == rel) acc.v[k] += d.v[k];
                    }
                } else {
#pragma unroll
                    for (int k = 0; k < 8; k++) acc.v[k] += d.v[k] / (float)(sh * sw);
                }
            }
        }
        st8(dx + q * 8, acc);
    }
}

/* Whether the eight-channel kernels take g (and x, y aligned). */
static bool pool8_ok(const cu_pool_geom *g, const void *a, const void *b) {
    return g->c % 8 == 0 && al16(a) && al16(b);
}

uint64_t cu_pool_bwd_ws_bytes(const cu_pool_geom *g) {
    if (!g->max || g->adaptive || g->c % 8 != 0 || g->kh * g->kw > 255) return 0;
    return (uint64_t)g->n * g->c * g->oh * g->ow;
}

template <typename H>
static int pool_fwd8(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x, float *y,
                     vd_err *e) {
    int64_t total = (int64_t)g->n * g->c * g->oh * g->ow / 8;
    int64_t in_total = (int64_t)g->n * g->c * g->h * g->w;
    if (FITS32(in_total) && FITS32(total * 8))
        k_pool_fwd8<H, int><<<grid_for(total, sm), CU_THREADS, 0, s>>>(*g, AS<H>(x), AS<H>(y), (int)total);
    else
        k_pool_fwd8<H, int64_t><<<grid_for(total, sm), CU_THREADS, 0, s>>>(*g, AS<H>(x), AS<H>(y), total);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ws: cu_pool_bwd_ws_bytes(g) bytes for max pooling (NULL: not taken). */
template <typename H>
static int pool_bwd8(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                     const float *dy, float *dx, float beta, void *ws, vd_err *e) {
    int64_t in8 = (int64_t)g->n * g->c * g->h * g->w / 8;
    int64_t out8 = (int64_t)g->n * g->c * g->oh * g->ow / 8;
    bool i32 = FITS32(in8 * 8) && FITS32(out8 * 8);
    uint8_t *arg = g->max ? (uint8_t *)ws : NULL;
    if (g->max) {
        if (i32) k_pool_arg8<H, int><<<grid_for(out8, sm), CU_THREADS, 0, s>>>(*g, AS<H>(x), arg, (int)out8);
        else k_pool_arg8<H, int64_t><<<grid_for(out8, sm), CU_THREADS, 0, s>>>(*g, AS<H>(x), arg, out8);
        KERNEL_CHECK(e);
    }
    if (i32)
        k_pool_bwd8<H, int><<<grid_for(in8, sm), CU_THREADS, 0, s>>>(*g, arg, AS<H>(dy), AS<H>(dx),
                                                                    beta, (int)in8);
    else
        k_pool_bwd8<H, int64_t><<<grid_for(in8, sm), CU_THREADS, 0, s>>>(*g, arg, AS<H>(dy),
                                                                        AS<H>(dx), beta, in8);
    KERNEL_CHECK(e);
    return VD_OK;
}

int cuk_pool_fwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x, float *y,
                 vd_dtype dt, vd_err *e) {
    if (dt != VD_DT_F32) {
        int64_t total = (int64_t)g->n * g->c * g->oh * g->ow;
        if (total <= 0) return VD_OK;
        if (pool8_ok(g, x, y)) {
            if (dt == VD_DT_F16) return pool_fwd8<cu_f16>(s, sm, g, x, y, e);
            return pool_fwd8<cu_bf16>(s, sm, g, x, y, e);
        }
        HALF_DISPATCH(dt, H, k_pool_fwd_nhwc<H><<<grid_for(total, sm), CU_THREADS, 0, s>>>(
                                 *g, AS<H>(x), AS<H>(y), total));
        KERNEL_CHECK(e);
        return VD_OK;
    }
    int64_t total = (int64_t)g->n * g->c * g->oh * g->ow;
    if (total <= 0) return VD_OK;
    int64_t in_total = (int64_t)g->n * g->c * g->h * g->w;
    unsigned gr = grid_for(total, sm);
    if (FITS32(total) && FITS32(in_total))
        k_pool_fwd<float, int><<<gr, CU_THREADS, 0, s>>>(*g, x, y, (int)total);
    else
        k_pool_fwd<float, int64_t><<<gr, CU_THREADS, 0, s>>>(*g, x, y, total);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* dx[i] (+)= sum over windows o containing i, in increasing o, of
 * (max: o's argmax == i ? dy[o] : 0; avg: dy[o] / divisor(o)). With beta 1
 * the terms are added to dx[i] one by one in that order, like the CPU
 * reference's scatter, so both round identically. */
template <typename T, typename I>
__global__ void k_pool_bwd(cu_pool_geom g, const T *x, const T *dy, T *dx, float beta,
                           I total) {
    GRID_STRIDE_T(I, i, total) {
        I plane = i / ((I)g.w * g.h);
        int r = (int)(i - plane * ((I)g.w * g.h));
        int ih = r / g.w, iw = r - ih * g.w;
        const T *xp = g.max ? x + plane * g.h * g.w : NULL;   /* avg: x unused */
        const T *dyp = dy + plane * g.oh * g.ow;
        int oh0, oh1, ow0, ow1;
        pool_outputs_of(g, true, ih, &oh0, &oh1);
        pool_outputs_of(g, false, iw, &ow0, &ow1);
        float acc = beta != 0.0f ? ld(dx[i]) : 0.0f;
        for (int oh = oh0; oh <= oh1; oh++) {
            int h0, h1, sh;
            pool_window(g, true, oh, &h0, &h1, &sh);
            if (ih < h0 || ih >= h1) continue;
            for (int ow = ow0; ow <= ow1; ow++) {
                int w0, w1, sw;
                pool_window(g, false, ow, &w0, &w1, &sw);
                if (iw < w0 || iw >= w1) continue;
                float d = ld(dyp[oh * g.ow + ow]);
                if (g.max) {
                    int arg;
                    window_max(xp, g.w, h0, h1, w0, w1, &arg);
                    if (arg == ih * g.w + iw) acc += d;
                } else {
                    acc += d / (float)(sh * sw);
                }
            }
        }
        st(&dx[i], acc);
    }
}

/* Fast path of k_pool_bwd for non-adaptive pooling whose windows do not
 * overlap (stride >= kernel in both dimensions), e.g. VGG's 2x2/2 max pool.
 * Every input element lies in at most one window, so the general kernel's
 * sum over windows has at most one term: dx[i] = (beta ? dx[i] : 0) + term,
 * or dx[i] unchanged / 0 when no window (or, for max, not its argmax) covers
 * it. Same window_max (tie and NaN rule) and the same single rounding as
 * k_pool_bwd, so results are bitwise equal to it. Grid: blockIdx.y walks the
 * planes (n*c), x the elements of one plane, so all index math is 32-bit
 * and the only divisions are by the plane width and the stride. */
template <typename T>
__global__ void k_pool_bwd_disjoint(cu_pool_geom g, const T *x, const T *dy, T *dx,
                                    float beta, int64_t planes) {
    const int hw = g.h * g.w;
    for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        const T *xp = x + plane * hw;
        const T *dyp = dy + plane * ((int64_t)g.oh * g.ow);
        T *dxp = dx + plane * hw;
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < hw; r += gridDim.x * blockDim.x) {
            int ih = r / g.w, iw = r - ih * g.w;
            float acc = beta != 0.0f ? ld(dxp[r]) : 0.0f;
            int th = ih + g.ph, tw = iw + g.pw;
            int oh = th / g.sh, ow = tw / g.sw;
            if (oh < g.oh && ow < g.ow && th - oh * g.sh < g.kh && tw - ow * g.sw < g.kw) {
                int h0, h1, sh, w0, w1, sw;
                pool_window(g, true, oh, &h0, &h1, &sh);
                pool_window(g, false, ow, &w0, &w1, &sw);
                if (ih >= h0 && ih < h1 && iw >= w0 && iw < w1) {
                    float d = ld(dyp[oh * g.ow + ow]);
                    if (g.max) {
                        int arg;
                        window_max(xp, g.w, h0, h1, w0, w1, &arg);
                        if (arg == r) acc += d;
                    } else {
                        acc += d / (float)(sh * sw);
                    }
                }
            }
            st(&dxp[r], acc);
        }
    }
}

/* ---- max-pool backward, one argmax per window (k_pool_bwd_tiled) ----------
 * k_pool_bwd recomputes, for every input element, the argmax of each of the
 * (up to 4, for 3x3/2) windows covering it: ~20 loads of x per element. This
 * kernel computes each window's argmax once per tile and gathers from those.
 *
 * Work item = tile: input rows [r0, r1) x columns [c0, c1) of `planes`
 * consecutive (n, c) planes (more than one plane only when the tile is the
 * whole plane, for small planes such as 13x13 or 27x27). Grid: one wave of
 * resident blocks (occupancy query; 48 registers -> 5 blocks of CU_THREADS
 * per SM), grid-stride over the ceil(n*c / planes) * tiles work items; all
 * index math inside a plane group in 32 bits. For each work item a block:
 *  1. tables: per tile row (of each plane) the covering output rows
 *     (pool_outputs_of: first, count) and the row's offsets, per tile column
 *     the covering output columns; x halo -> shared memory: the input region
 *     of every window covering the tile (whole rows when the tile spans the
 *     width: then one contiguous, coalesced copy over all its planes);
 *  2. every window [oha, ohb] x [owa, owb] of the tile: argmax (window_max_at
 *     on the shared copy, as an int index in the plane) and its dy, into
 *     shared memory;
 *  3. every input element: acc = beta ? dx : 0, then for oh ascending, ow
 *     ascending over its covering windows: acc += dy if argmax == element;
 *     dx = acc -- k_pool_bwd's loop with its window_max replaced by the
 *     table, so dx is bitwise the same (see cuk_pool_bwd_tiled in
 *     cuda_internal.h).
 * For non-adaptive windows pool_outputs_of is exact (every o in [o0, o1]
 * contains the element; windows wholly in the padding contain none), so
 * k_pool_bwd's membership re-check never drops a term and is left out. */

/* Tiling of k_pool_bwd_tiled: tile size, and the shared-memory layout in
 * 4-byte words from the start: row table (int4 per tile row per plane) at 0,
 * column table (int2 per tile column), window argmax (int) and dy (float),
 * noh_max x now_max per plane, then the x halo. */
struct pool_tiling {
    int th, tw, planes;        /* tile: input rows, columns; planes per tile */
    int tiles_w, tiles;        /* tiles across a plane, tiles per plane group */
    int o_ct, o_arg, o_dy, o_x;
    int smem;                  /* bytes */
};

enum { POOL_TILE_INPUTS = 4096,          /* input elements per tile aimed at */
       POOL_TILE_SMEM = 48 * 1024 };     /* shared memory per block at most (no opt-in) */

static int64_t cdiv64(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Shared-memory layout of t (th, tw, planes set) for g, from upper bounds
 * over all tiles: a tile of th rows meets at most ceil((th - 1 + kh) / sh)
 * output rows, whose windows span at most min((noh - 1)*sh + kh,
 * th + 2*(kh - 1)) input rows (likewise columns). False if it exceeds
 * POOL_TILE_SMEM. */
static bool pool_tiling_layout(const cu_pool_geom *g, pool_tiling *t) {
    int64_t th = t->th, tw = t->tw, np = t->planes, H = g->h, W = g->w;
    int64_t noh = min64(g->oh, cdiv64(th - 1 + g->kh, g->sh));
    int64_t now = min64(g->ow, cdiv64(tw - 1 + g->kw, g->sw));
    int64_t xr = min64(H, min64((noh - 1) * g->sh + g->kh, th + 2 * (int64_t)(g->kh - 1)));
    int64_t xwords;
    if (tw >= W) {
        xwords = (np - 1) * H * W + xr * W;
    } else {
        int64_t xc = min64(W, min64((now - 1) * g->sw + g->kw, tw + 2 * (int64_t)(g->kw - 1)));
        xwords = xr * xc;
    }
    int64_t rt = 4 * np * th, ct = 2 * tw, win = np * noh * now;
    int64_t words = rt + ct + 2 * win + xwords;
    if (words * 4 > POOL_TILE_SMEM) return false;
    t->o_ct = (int)rt;
    t->o_arg = (int)(rt + ct);
    t->o_dy = (int)(rt + ct + win);
    t->o_x = (int)(rt + ct + 2 * win);
    t->smem = (int)(words * 4);
    t->tiles_w = (int)cdiv64(W, tw);
    t->tiles = (int)(cdiv64(H, th) * t->tiles_w);
    return true;
}

/* Tiling for g, or false where k_pool_bwd_tiled cannot take it: adaptive or
 * average pooling; a stride, kernel or size < 1 or a negative padding; a
 * plane or output plane of 2^30 elements or more; a window so large that
 * even a 1x1 tile's windows and halo exceed POOL_TILE_SMEM. Automatic: tiles
 * of about POOL_TILE_INPUTS elements -- whole rows when the width is <= 256
 * (else 128 columns), rows split evenly and rounded up to the stride, and
 * several whole planes when a plane has <= POOL_TILE_INPUTS / 2 elements
 * (as long as that leaves >= 32 tiles per SM: sm, the SM count);
 * halved (planes, then rows, then columns) until the layout fits. force
 * (tests): NULL, or {rows, columns, planes}, each 0 for automatic; planes
 * > 1 needs the whole plane. */
static bool pool_tiling_plan(const cu_pool_geom *g, int64_t planes, int sm, const int *force,
                             pool_tiling *t) {
    if (g->adaptive || !g->max) return false;
    if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->ph < 0 || g->pw < 0) return false;
    if (g->h < 1 || g->w < 1 || g->oh < 1 || g->ow < 1 || planes < 1) return false;
    int64_t hw = (int64_t)g->h * g->w;
    if (!FITS32(hw) || !FITS32((int64_t)g->oh * g->ow)) return false;
    const int H = g->h, W = g->w;
    int tw = W <= 256 ? W : (int)min64(W, cdiv64(128, g->sw) * g->sw);
    int th, np = 1;
    if (tw == W && hw <= POOL_TILE_INPUTS / 2) {
        th = H;
        /* but >= 32 work items per SM, so that the last round is a small
         * part of the run */
        int64_t most = planes / ((int64_t)(sm > 0 ? sm : 132) * 32);
        np = (int)min64(POOL_TILE_INPUTS / hw, most > 1 ? most : 1);
        np = (int)cdiv64(planes, cdiv64(planes, np));     /* even groups */
    } else {
        th = POOL_TILE_INPUTS / tw;
        if (th < 1) th = 1;
        if (th >= H) {
            th = H;
        } else {
            th = (int)cdiv64(H, cdiv64(H, th));             /* even tiles */
            th = (int)min64(H, cdiv64(th, g->sh) * g->sh);
        }
    }
    if (force) {
        if (force[0]) th = force[0];
        if (force[1]) tw = force[1];
        np = force[2] ? force[2] : th == H && tw == W ? np : 1;
        if (th < 1 || th > H || tw < 1 || tw > W || np < 1 || np > planes) return false;
        if (np > 1 && (th != H || tw != W || !FITS32(np * hw))) return false;
        t->th = th; t->tw = tw; t->planes = np;
        return pool_tiling_layout(g, t);
    }
    for (;;) {
        t->th = th; t->tw = tw; t->planes = np;
        if (pool_tiling_layout(g, t)) return true;
        if (np > 1) np = (np + 1) / 2;
        else if (th > 1) th = (th + 1) / 2;
        else if (tw > 1) tw = (tw + 1) / 2;
        else return false;
    }
}

/* Five blocks of CU_THREADS (1280 threads) per SM where an SM holds them
 * (2048 threads on sm_80/90/100, 1536 on sm_86/89/120); sm_75 holds 1024,
 * where ptxas reports the hint out of range. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define POOL_BWD_TILED_MIN_BLOCKS 1
#else
#define POOL_BWD_TILED_MIN_BLOCKS 5
#endif
template <typename T>
__global__ void __launch_bounds__(CU_THREADS, POOL_BWD_TILED_MIN_BLOCKS)
k_pool_bwd_tiled(cu_pool_geom g, pool_tiling t, const T *__restrict__ x,
                 const T *__restrict__ dy, T *__restrict__ dx, float beta,
                 int64_t planes, int64_t nwork) {
    extern __shared__ int4 smem[];
    int4 *rtab = smem;
    int *words = (int *)smem;
    int2 *ctab = (int2 *)(words + t.o_ct);
    int *args = words + t.o_arg;
    float *dys = (float *)(words + t.o_dy);
    float *xs = (float *)(words + t.o_x);
    const int H = g.h, W = g.w, hw = H * W, ohw = g.oh * g.ow;
    const bool full = t.tw >= W;              /* tiles of whole rows */
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int64_t wi = blockIdx.x; wi < nwork; wi += gridDim.x) {
        const int64_t grp = wi / t.tiles;
        const int tile = (int)(wi - grp * t.tiles);
        const int ty = tile / t.tiles_w, tx = tile - ty * t.tiles_w;
        const int64_t plane0 = grp * t.planes;
        const int np = planes - plane0 < t.planes ? (int)(planes - plane0) : t.planes;
        const T *xg = x + plane0 * hw;
        const T *dyg = dy + plane0 * ohw;
        T *dxg = dx + plane0 * hw;
        const int r0 = ty * t.th, r1 = min(H, r0 + t.th), nr = r1 - r0;
        const int c0 = tx * t.tw, c1 = min(W, c0 + t.tw), nc = c1 - c0;
        /* windows meeting the tile: output rows [oha, oha + noh), columns
         * [owa, owa + now) (pool_outputs_of is monotone in the input index) */
        int oha, ohb, owa, owb, u;
        pool_outputs_of(g, true, r0, &oha, &u);
        pool_outputs_of(g, true, r1 - 1, &u, &ohb);
        pool_outputs_of(g, false, c0, &owa, &u);
        pool_outputs_of(g, false, c1 - 1, &u, &owb);
        int noh = ohb - oha + 1, now = owb - owa + 1;
        if (noh < 1 || now < 1) noh = now = 0;     /* no window meets the tile */
        /* their input region [xr0, xr1) x [xc0, xc1): whole rows when full,
         * so the planes' regions lie hw apart in shared memory as in x */
        int xr0 = 0, xr1 = 0, xc0 = 0, xc1 = full ? W : 0;
        if (noh > 0) {
            xr0 = max(0, oha * g.sh - g.ph);
            xr1 = min(H, ohb * g.sh - g.ph + g.kh);
            if (!full) {
                xc0 = max(0, owa * g.sw - g.pw);
                xc1 = min(W, owb * g.sw - g.pw + g.kw);
            }
        }
        const int xp = xc1 - xc0;
        const int xcount = noh == 0 ? 0 : full ? (np - 1) * hw + (xr1 - xr0) * W
                                               : (xr1 - xr0) * xp;

        /* 1. tables and the x halo */
        for (int r = tid; r < np * nr; r += nt) {
            int p = r / nr, ih = r0 + (r - p * nr), a, b;
            pool_outputs_of(g, true, ih, &a, &b);
            rtab[r] = make_int4((p * noh + a - oha) * now, max(0, b - a + 1), ih * W, p * hw);
        }
        for (int c = tid; c < nc; c += nt) {
            int a, b;
            pool_outputs_of(g, false, c0 + c, &a, &b);
            ctab[c] = make_int2(a - owa, max(0, b - a + 1));
        }
        if (full) {
            const T *src = xg + xr0 * W;
            int f = tid;
            for (; f + 3 * nt < xcount; f += 4 * nt) {    /* 4 loads in flight */
                float v0 = ld(src[f]), v1 = ld(src[f + nt]), v2 = ld(src[f + 2 * nt]),
                      v3 = ld(src[f + 3 * nt]);
                xs[f] = v0;
                xs[f + nt] = v1;
                xs[f + 2 * nt] = v2;
                xs[f + 3 * nt] = v3;
            }
            for (; f < xcount; f += nt) xs[f] = ld(src[f]);
        } else if (xcount > 0) {
            int r = tid / xp, c = tid - r * xp;
            const int dr = nt / xp, dc = nt - dr * xp;
            for (int f = tid; f < xcount; f += nt) {
                xs[f] = ld(xg[(xr0 + r) * W + xc0 + c]);
                r += dr;
                c += dc;
                if (c >= xp) { c -= xp; r++; }
            }
        }
        __syncthreads();

        /* 2. each window's argmax and dy: window f = (p*noh + ohl)*now + owl */
        const int nwin = np * noh * now;
        if (nwin > 0) {
            int r = tid / now, c = tid - r * now;
            const int dr = nt / now, dc = nt - dr * now;
            for (int f = tid; f < nwin; f += nt) {
                int p = np > 1 ? r / noh : 0;
                int oh = oha + r - p * noh, ow = owa + c;
                float d = ld(dyg[p * ohw + oh * g.ow + ow]);   /* load first: in flight meanwhile */
                int h0, h1, w0, w1, span, arg;
                pool_window(g, true, oh, &h0, &h1, &span);
                pool_window(g, false, ow, &w0, &w1, &span);
                window_max_at(xs + p * hw, xp, xr0, xc0, W, h0, h1, w0, w1, &arg);
                args[f] = arg;
                dys[f] = d;
                r += dr;
                c += dc;
                if (c >= now) { c -= now; r++; }
            }
        }
        __syncthreads();

        /* 3. gather, in k_pool_bwd's order and rounding */
        {
            const int n3 = np * nr * nc;
            int r = tid / nc, c = tid - r * nc;
            const int dr = nt / nc, dc = nt - dr * nc;
            for (int f = tid; f < n3; f += nt) {
                const int4 rt = rtab[r];
                const int2 ct = ctab[c];
                const int idx = rt.z + c0 + c;        /* ih*W + iw */
                T *dp = dxg + (rt.w + idx);
                float acc = beta != 0.0f ? ld(*dp) : 0.0f;
                int k = rt.x + ct.x;
                for (int i = 0; i < rt.y; i++, k += now)
                    for (int j = 0; j < ct.y; j++)
                        if (args[k + j] == idx) acc += dys[k + j];
                st(dp, acc);
                r += dr;
                c += dc;
                if (c >= nc) { c -= nc; r++; }
            }
        }
        __syncthreads();          /* before the next tile overwrites shared memory */
    }
}

template <typename T>
static int pool_bwd_tiled_launch_t(cudaStream_t s, int sm, const cu_pool_geom *g,
                                   const pool_tiling *t, const T *x, const T *dy, T *dx,
                                   float beta, vd_err *e) {
    int64_t planes = (int64_t)g->n * g->c;
    int64_t nwork = cdiv64(planes, t->planes) * t->tiles;
    /* one wave of resident blocks, each taking every grid-th tile: no tail
     * wave of a few blocks (the tiles are of equal size) */
    int per_sm = 0;
    CUDA_CHECK(e, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_pool_bwd_tiled<T>,
                                                                CU_THREADS, (size_t)t->smem));
    if (per_sm < 1) per_sm = 1;
    int64_t grid = min64(nwork, (int64_t)(sm > 0 ? sm : 132) * per_sm);
    k_pool_bwd_tiled<T><<<(unsigned)grid, CU_THREADS, (size_t)t->smem, s>>>(*g, *t, x, dy, dx,
                                                                            beta, planes, nwork);
    KERNEL_CHECK(e);
    return VD_OK;
}

static int pool_bwd_tiled_launch(cudaStream_t s, int sm, const cu_pool_geom *g,
                                 const pool_tiling *t, const float *x, const float *dy, float *dx,
                                 float beta, vd_dtype dt, vd_err *e) {
    DT_DISPATCH(dt, T, return pool_bwd_tiled_launch_t(s, sm, g, t, AS<T>(x), AS<T>(dy), AS<T>(dx),
                                                      beta, e));
    return VD_OK;   /* not reached */
}

int cuk_pool_bwd_tiled(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                       const float *dy, float *dx, float beta, const int *tile, vd_dtype dt,
                       vd_err *e) {
    int64_t total = (int64_t)g->n * g->c * g->h * g->w;
    if (total <= 0) return VD_OK;
    if (dt != VD_DT_F32)
        return vd_errf(e, VD_EUNSUPPORTED, "max-pool backward: the tiled kernel is NCHW only");
    pool_tiling t;
    if (!pool_tiling_plan(g, (int64_t)g->n * g->c, sm, tile, &t))
        return vd_errf(e, VD_EUNSUPPORTED,
                       "max-pool backward: the tiled kernel cannot take %dx%d (%dx%d/%dx%d "
                       "pad %dx%d%s)", g->h, g->w, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw,
                       tile ? ", forced tile" : "");
    return pool_bwd_tiled_launch(s, sm, g, &t, x, dy, dx, beta, dt, e);
}

int cuk_pool_bwd_general(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                         const float *dy, float *dx, float beta, vd_dtype dt, vd_err *e) {
    int64_t total = (int64_t)g->n * g->c * g->h * g->w;
    if (total <= 0) return VD_OK;
    if (dt != VD_DT_F32) {
        HALF_DISPATCH(dt, H, k_pool_bwd_nhwc<H><<<grid_for(total, sm), CU_THREADS, 0, s>>>(
                                 *g, AS<H>(x), AS<H>(dy), AS<H>(dx), beta, total));
        KERNEL_CHECK(e);
        return VD_OK;
    }
    int64_t out_total = (int64_t)g->n * g->c * g->oh * g->ow;
    unsigned gr = grid_for(total, sm);
    if (FITS32(total) && FITS32(out_total))
        k_pool_bwd<float, int><<<gr, CU_THREADS, 0, s>>>(*g, x, dy, dx, beta, (int)total);
    else
        k_pool_bwd<float, int64_t><<<gr, CU_THREADS, 0, s>>>(*g, x, dy, dx, beta, total);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* Disjoint windows: k_pool_bwd_disjoint; other non-adaptive max pooling:
 * k_pool_bwd_tiled where pool_tiling_plan takes it; the rest (adaptive,
 * overlapping average pooling, huge planes or windows): k_pool_bwd. */
int cuk_pool_bwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x, const float *dy,
                 float *dx, float beta, void *ws, uint64_t ws_bytes, vd_dtype dt, vd_err *e) {
    int64_t total = (int64_t)g->n * g->c * g->h * g->w;
    if (total <= 0) return VD_OK;
    if (dt != VD_DT_F32) {
        uint64_t need = cu_pool_bwd_ws_bytes(g);
        bool ok8 = pool8_ok(g, dy, dx) && al16(x) &&
                   (g->max ? need > 0 && ws && ws_bytes >= need && ((uintptr_t)ws & 7u) == 0
                           : true);
        if (ok8) {
            if (dt == VD_DT_F16) return pool_bwd8<cu_f16>(s, sm, g, x, dy, dx, beta, ws, e);
            return pool_bwd8<cu_bf16>(s, sm, g, x, dy, dx, beta, ws, e);
        }
        return cuk_pool_bwd_general(s, sm, g, x, dy, dx, beta, dt, e);
    }
    int64_t planes = (int64_t)g->n * g->c;
    int64_t hw = (int64_t)g->h * g->w;
    if (!g->adaptive && g->sh >= g->kh && g->sw >= g->kw && g->sh > 0 && g->sw > 0 &&
        FITS32(hw) && FITS32((int64_t)g->oh * g->ow)) {
        int64_t bx = (hw + CU_THREADS - 1) / CU_THREADS;
        int64_t cap = (int64_t)(sm > 0 ? sm : 132) * 16;
        if (bx > cap) bx = cap;
        int64_t by = cap / bx;            /* about sm*16 blocks in all */
        if (by < 1) by = 1;
        if (by > planes) by = planes;
        if (by > 65535) by = 65535;
        dim3 grid((unsigned)bx, (unsigned)by);
        k_pool_bwd_disjoint<float><<<grid, CU_THREADS, 0, s>>>(*g, x, dy, dx, beta, planes);
        KERNEL_CHECK(e);
        return VD_OK;
    }
    pool_tiling t;
    if (pool_tiling_plan(g, planes, sm, NULL, &t))
        return pool_bwd_tiled_launch(s, sm, g, &t, x, dy, dx, beta, dt, e);
    return cuk_pool_bwd_general(s, sm, g, x, dy, dx, beta, dt, e);
}

/* Test hook (declared in cuda_internal.h; tests/cuda/test_cuda_ops.c). */
extern "C" int vd_cuda_pool_bwd_test(const int geom[12], const float *x, const float *dy,
                                     float *dx, float beta, int path, const int tile[3],
                                     vd_err *e) {
    cu_pool_geom g;
    g.n = geom[0]; g.c = geom[1]; g.h = geom[2]; g.w = geom[3]; g.oh = geom[4]; g.ow = geom[5];
    g.kh = geom[6]; g.kw = geom[7]; g.sh = geom[8]; g.sw = geom[9]; g.ph = geom[10];
    g.pw = geom[11];
    g.adaptive = false;
    g.max = true;
    if (path < 0 || path > 2) return vd_errf(e, VD_EUSAGE, "pool bwd test: path %d", path);
    int64_t xn = (int64_t)g.n * g.c * g.h * g.w, yn = (int64_t)g.n * g.c * g.oh * g.ow;
    int dev, sm;
    CUDA_CHECK(e, cudaGetDevice(&dev));
    CUDA_CHECK(e, cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, dev));
    float *d = NULL;
    CUDA_CHECK(e, cudaMalloc((void **)&d, (size_t)(2 * xn + yn + 1) * sizeof(float)));
    float *dx_d = d, *x_d = d + xn, *dy_d = d + 2 * xn;
    int rc = VD_OK;
    CUDA_GOTO(e, rc, out, cudaMemcpy(x_d, x, (size_t)xn * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_GOTO(e, rc, out, cudaMemcpy(dy_d, dy, (size_t)yn * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_GOTO(e, rc, out, cudaMemcpy(dx_d, dx, (size_t)xn * sizeof(float), cudaMemcpyHostToDevice));
    rc = path == 0 ? cuk_pool_bwd(0, sm, &g, x_d, dy_d, dx_d, beta, NULL, 0, VD_DT_F32, e)
       : path == 1 ? cuk_pool_bwd_general(0, sm, &g, x_d, dy_d, dx_d, beta, VD_DT_F32, e)
                   : cuk_pool_bwd_tiled(0, sm, &g, x_d, dy_d, dx_d, beta, tile, VD_DT_F32, e);
    if (rc) goto out;
    CUDA_GOTO(e, rc, out, cudaDeviceSynchronize());
    CUDA_GOTO(e, rc, out, cudaMemcpy(dx, dx_d, (size_t)xn * sizeof(float), cudaMemcpyDeviceToHost));
out:
    cudaFree(d);
    return rc;
}
