/* cuda_k_pool.cu — pooling forward and backward: the kernels of either
 * layout (k_pool_fwd, k_pool_bwd), the eight-channel channels-last kernels,
 * the disjoint-window and NCHW tiling backwards, and the launchers that
 * choose among them (k_pool_bwd_tiled in cuda_k_pool_tiled.cu). */
#include "backend/cuda/cuda_k_pool.h"

/* ---- one kernel per direction for either layout -----------------------------
 * CL (the layout; launchers pass cu_pool_geom.cl): false for NCHW, element
 * i = (plane*rows + r)*cols + col over n*c planes; true for channels-last,
 * i = ((img*rows + r)*cols + col)*c + ch. Only the index math
 * differs: the window is walked in the same row-major order with the same
 * max rule and float sums, pixels cs elements apart (1, or c), so both
 * layouts give the same bits on the same values. I = int where every index
 * fits (FITS32). */

/* Element i of a map of rows x cols pixels: its plane (NCHW) or image
 * (channels-last) *pl, channel *ch (channels-last; 0 for NCHW), row *r and
 * column *col. */
template <bool CL, typename I>
__device__ __forceinline__ void pool_split(const cu_pool_geom &g, I i, int rows, int cols, I *pl,
                                           int *ch, int *r, int *col) {
    I pix = i;
    *ch = 0;
    if (CL) {
        pix = i / g.c;
        *ch = (int)(i - pix * g.c);
    }
    const I area = (I)rows * cols;
    *pl = pix / area;
    int rem = (int)(pix - *pl * area);
    *r = rem / cols;
    *col = rem - *r * cols;
}

/* Offset of the first pixel of plane / image pl (channel ch) in a map of
 * area pixels per plane. */
template <bool CL, typename I>
__device__ __forceinline__ I pool_base(const cu_pool_geom &g, I pl, int ch, I area) {
    return CL ? pl * area * g.c + ch : pl * area;
}

template <bool CL, typename T, typename I>
__global__ void k_pool_fwd(cu_pool_geom g, const T *x, T *y, I total) {
    const I cs = CL ? (I)g.c : (I)1;
    GRID_STRIDE_T(I, i, total) {
        I pl;
        int ch, oh, ow;
        pool_split<CL>(g, i, g.oh, g.ow, &pl, &ch, &oh, &ow);
        const T *xp = x + pool_base<CL>(g, pl, ch, (I)g.h * g.w);
        int h0, h1, sh, w0, w1, sw;
        pool_window(g, true, oh, &h0, &h1, &sh);
        pool_window(g, false, ow, &w0, &w1, &sw);
        if (h0 >= h1 || w0 >= w1) { st(&y[i], 0.0f); continue; }
        if (g.max) {
            int arg;
            st(&y[i], window_max(xp, g.w, cs, h0, h1, w0, w1, &arg));
        } else {
            float acc = 0.0f;
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++) acc += ld(xp[(I)(ih * g.w + iw) * cs]);
            st(&y[i], acc / (float)(sh * sw));
        }
    }
}

/* dx[i] (+)= sum over windows o containing i, in increasing o, of
 * (max: o's argmax == i ? dy[o] : 0; avg: dy[o] / divisor(o)). With beta 1
 * the terms are added to dx[i] one by one in that order, like the CPU
 * reference's scatter, so both round identically. */
template <bool CL, typename T, typename I>
__global__ void k_pool_bwd(cu_pool_geom g, const T *x, const T *dy, T *dx, float beta,
                           I total) {
    const I cs = CL ? (I)g.c : (I)1;
    GRID_STRIDE_T(I, i, total) {
        I pl;
        int ch, ih, iw;
        pool_split<CL>(g, i, g.h, g.w, &pl, &ch, &ih, &iw);
        const T *xp = g.max ? x + pool_base<CL>(g, pl, ch, (I)g.h * g.w) : NULL;   /* avg: x unused */
        const T *dyp = dy + pool_base<CL>(g, pl, ch, (I)g.oh * g.ow);
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
                float d = ld(dyp[(I)(oh * g.ow + ow) * cs]);
                if (g.max) {
                    int arg;
                    window_max(xp, g.w, cs, h0, h1, w0, w1, &arg);
                    if (arg == ih * g.w + iw) acc += d;
                } else {
                    acc += d / (float)(sh * sw);
                }
            }
        }
        st(&dx[i], acc);
    }
}

/* k_pool_fwd / k_pool_bwd for element type T in layout CL (g->cl), with
 * 32-bit indices where the input and output element counts fit. */
template <bool CL, typename T>
static void pool_fwd_launch(cudaStream_t s, int sm, const cu_pool_geom *g, const T *x, T *y,
                            int64_t total, int64_t in_total) {
    unsigned gr = grid_for(total, sm);
    if (FITS32(total) && FITS32(in_total))
        k_pool_fwd<CL, T, int><<<gr, CU_THREADS, 0, s>>>(*g, x, y, (int)total);
    else
        k_pool_fwd<CL, T, int64_t><<<gr, CU_THREADS, 0, s>>>(*g, x, y, total);
}

template <bool CL, typename T>
static void pool_bwd_launch(cudaStream_t s, int sm, const cu_pool_geom *g, const T *x,
                            const T *dy, T *dx, float beta, int64_t total, int64_t out_total) {
    unsigned gr = grid_for(total, sm);
    if (FITS32(total) && FITS32(out_total))
        k_pool_bwd<CL, T, int><<<gr, CU_THREADS, 0, s>>>(*g, x, dy, dx, beta, (int)total);
    else
        k_pool_bwd<CL, T, int64_t><<<gr, CU_THREADS, 0, s>>>(*g, x, dy, dx, beta, total);
}

/* ---- channels-last pooling on eight channels per thread (c % 8 == 0; 16-bit,
 * or tf32's floats in two 16-byte loads: ld8 / st8)
 * Index q runs over (pixel, channel group of 8); I = int where the element
 * counts fit (FITS32), as the NCHW kernels. Per channel the same window walk,
 * max rule (first maximum in row-major order, NaN wins) and float sums as
 * k_pool_fwd / k_pool_bwd in channels-last, so the results are the same bits.
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
 * k_pool_bwd (rows, then columns, ascending). mask (the pool's x, where the
 * pool takes the backward of the in-place ReLU whose output x is; else
 * NULL): then 0 where x <= 0, as the ReLU's backward would have rewritten
 * the stored dx (beta 0: the value is stored once either way). */
template <typename H, typename I>
__global__ void k_pool_bwd8(cu_pool_geom g, const uint8_t *arg, const H *dy, H *dx,
                            float beta, I total, const H *mask) {
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
        if (mask) {   /* the in-place ReLU's backward after it (k_relu_bwd8's select) */
            bf8 v = ld8(mask + q * 8);
#pragma unroll
            for (int k = 0; k < 8; k++) acc.v[k] = v.v[k] <= 0.0f ? 0.0f : acc.v[k];
        }
        st8(dx + q * 8, acc);
    }
}

/* Whether the eight-channel kernels take g (and x, y aligned). */
static bool pool8_ok(const cu_pool_geom *g, const void *a, const void *b) {
    return g->c % 8 == 0 && al16(a) && al16(b);
}

uint64_t cu_pool_bwd_ws_bytes(const cu_pool_geom *g) {
    if (cu_pool_tile_ok(g)) return 0;   /* k_pool_tile8: no argmax pass */
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
                     const float *dy, float *dx, float beta, void *ws, vd_err *e,
                     bool relu = false) {
    const H *mask = relu ? AS<H>(x) : NULL;
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
                                                                    beta, (int)in8, mask);
    else
        k_pool_bwd8<H, int64_t><<<grid_for(in8, sm), CU_THREADS, 0, s>>>(*g, arg, AS<H>(dy),
                                                                        AS<H>(dx), beta, in8, mask);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- the tiling max-pool backward: one thread per output window --------------
 * Max pooling whose windows tile the input exactly (kernel == stride, no
 * padding, oh * kh == h, ow * kw == w: VGG's 2x2/2), channels-last, eight
 * channels a thread: thread q = (output pixel, channel group) reads its
 * window of x once (window_max8: the argmax of k_pool_arg8), dy once, and
 * writes every dx of the window once: no argmax pass, no workspace, no
 * zero fill (every input lies in exactly one window). Each dx element is
 * k_pool_bwd8's: (beta ? dx : 0) plus dy where it is the window's argmax,
 * in the same float adds, so the same bits.
 * RELU (the max pool + ReLU backward fusion, vd_op_io.relu_dx): then
 * x <= 0 ? 0 : that, as k_relu_bwd8 masks (x is the in-place ReLU's y).
 * BIAS (with RELU, beta 0): also the per-channel sums of the dx written
 * (the conv's bias gradient): each thread keeps one channel group (G = c / 8
 * divides the block, so the grid stride keeps q % G), the block adds its
 * threads' sums in a fixed order into part[channel * gridDim.x + block],
 * k_chan_final_w adds those: deterministic for a given grid. The stored
 * dx values are exact in the stored type (0, or one dy), so the sums are of
 * what the ReLU's backward would have summed, in another order. */
/* The block's sums of k_pool_tile8 (BIAS), thread t's of channel group t % G:
 * thread t < G adds those of t, t + G, ... in that order into
 * part[(8 t + k) * gridDim.x + block]. Every thread of the block calls it. */
__device__ __forceinline__ void pool_tile_sums(const float sum[8], int G, float *part) {
    __shared__ float red[8][CU_THREADS];
#pragma unroll
    for (int k = 0; k < 8; k++) red[k][threadIdx.x] = sum[k];
    __syncthreads();
    if ((int)threadIdx.x >= G) return;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        float v = 0.0f;
        for (int j = (int)threadIdx.x; j < (int)blockDim.x; j += G) v += red[k][j];
        part[(int64_t)(threadIdx.x * 8 + k) * gridDim.x + blockIdx.x] = v;
    }
}

/* One position of k_pool_tile8's window: dx = (beta ? dx : 0) plus dy where
 * rel is the argmax (a), masked by x (v) with RELU, summed with BIAS. */
template <typename H, bool RELU, bool BIAS>
__device__ __forceinline__ void pool_tile_put(H *p, float beta, const bf8 &d, const unsigned a[8],
                                              unsigned rel, const bf8 &v, float sum[8]) {
    bf8 acc;
    if (beta != 0.0f) acc = ld8(p);
    else {
#pragma unroll
        for (int k = 0; k < 8; k++) acc.v[k] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (a[k] == rel) acc.v[k] += d.v[k];
    if (RELU) {
#pragma unroll
        for (int k = 0; k < 8; k++) acc.v[k] = v.v[k] <= 0.0f ? 0.0f : acc.v[k];
    }
    if (BIAS) {
#pragma unroll
        for (int k = 0; k < 8; k++) sum[k] += acc.v[k];
    }
    st8(p, acc);
}

/* K: the window's side where it is K x K at compile time (2: VGG's; the
 * window's loads then all issue before the first compare, and x stays in
 * registers for the mask), 0: g's, x read again for the mask. */
template <typename H, typename I, int K, bool RELU, bool BIAS>
__global__ void __launch_bounds__(CU_THREADS, 3) k_pool_tile8(cu_pool_geom g, const H *x, const H *dy, H *dx, float beta,
                             I total, float *part) {
    const int G = g.c / 8;
    float sum[8];
#pragma unroll
    for (int k = 0; k < 8; k++) sum[k] = 0.0f;
    GRID_STRIDE_T(I, q, total) {
        I pix = q / (I)G;
        int c0 = (int)(q - pix * (I)G) * 8;
        I t = pix / (I)g.ow;
        int ow = (int)(pix - t * (I)g.ow);
        I img = t / (I)g.oh;
        int oh = (int)(t - img * (I)g.oh);
        const I ib = img * (I)g.h * g.w * g.c + c0;
        const H *xp = x + ib;
        H *dxp = dx + ib;
        bf8 d = ld8(dy + q * 8);
        float m[8];
        unsigned a[8];
        if (K) {
            constexpr int S = K > 0 ? K : 1;   /* (K, where this branch runs) */
            const int h0 = oh * S, w0 = ow * S;
            bf8 v[S * S];
#pragma unroll
            for (int j = 0; j < S * S; j++)
                v[j] = ld8(xp + (I)((h0 + j / S) * g.w + w0 + j % S) * g.c);
            /* window_max8's rule, in its order (row-major; rel = j) */
#pragma unroll
            for (int k = 0; k < 8; k++) { m[k] = -INFINITY; a[k] = 0u; }
#pragma unroll
            for (int j = 0; j < S * S; j++)
#pragma unroll
                for (int k = 0; k < 8; k++)
                    if (v[j].v[k] > m[k] || isnan(v[j].v[k])) { m[k] = v[j].v[k]; a[k] = (unsigned)j; }
#pragma unroll
            for (int j = 0; j < S * S; j++)
                pool_tile_put<H, RELU, BIAS>(dxp + (I)((h0 + j / S) * g.w + w0 + j % S) * g.c,
                                             beta, d, a, (unsigned)j, v[j], sum);
        } else {
            const int h0 = oh * g.kh, w0 = ow * g.kw;
            window_max8<I>(g, xp, h0, h0 + g.kh, w0, w0 + g.kw, m, a);
            for (int ih = h0; ih < h0 + g.kh; ih++)
                for (int iw = w0; iw < w0 + g.kw; iw++) {
                    I off = (I)(ih * g.w + iw) * g.c;
                    bf8 v;
                    if (RELU) v = ld8(xp + off);
                    pool_tile_put<H, RELU, BIAS>(dxp + off, beta, d, a,
                                                 (unsigned)((ih - h0) * g.kw + (iw - w0)), v, sum);
                }
        }
    }
    if (BIAS) pool_tile_sums(sum, G, part);
}

bool cu_pool_tile_ok(const cu_pool_geom *g) {
    return g->cl && g->max && !g->adaptive && g->c % 8 == 0 && g->kh > 0 && g->kw > 0 &&
           g->sh == g->kh && g->sw == g->kw && g->ph == 0 && g->pw == 0 &&
           g->oh * g->kh == g->h && g->ow * g->kw == g->w && g->kh * g->kw <= 255;
}

/* The grid of k_pool_tile8 over g's windows. */
static unsigned tile_grid(const cu_pool_geom *g, int sm) {
    return grid_for((int64_t)g->n * g->oh * g->ow * (g->c / 8), sm);
}

uint64_t cu_pool_tile_bias_ws_bytes(const cu_pool_geom *g, int sm) {
    if (!cu_pool_tile_ok(g) || CU_THREADS % (g->c / 8) != 0) return 0;
    return (uint64_t)tile_grid(g, sm) * (uint64_t)g->c * sizeof(float);
}

int cuk_pool_tile_bwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                      const float *dy, float *dx, float beta, bool relu, float *db, void *ws,
                      uint64_t ws_bytes, vd_dtype dt, vd_err *e) {
    uint64_t need = db ? cu_pool_tile_bias_ws_bytes(g, sm) : 0;
    if (!cu_pool_tile_ok(g) || !al16(x) || !al16(dy) || !al16(dx) ||
        (db && (!relu || beta != 0.0f || !need || !ws || ws_bytes < need)))
        return vd_errf(e, VD_EINTERNAL, "cuk_pool_tile_bwd: geometry or operands not taken");
    int64_t total = (int64_t)g->n * g->oh * g->ow * (g->c / 8);
    if (total <= 0) return VD_OK;
    int64_t in_total = (int64_t)g->n * g->c * g->h * g->w;
    unsigned grid = tile_grid(g, sm);
    float *part = (float *)ws;
#define TILE_LAUNCH(I, R, B)                                                                  \
    DT_DISPATCH(dt, H,                                                                        \
                if (k2) k_pool_tile8<H, I, 2, R, B><<<grid, CU_THREADS, 0, s>>>(              \
                    *g, AS<H>(x), AS<H>(dy), AS<H>(dx), beta, (I)total, part);                \
                else k_pool_tile8<H, I, 0, R, B><<<grid, CU_THREADS, 0, s>>>(                 \
                    *g, AS<H>(x), AS<H>(dy), AS<H>(dx), beta, (I)total, part))
    const bool k2 = g->kh == 2 && g->kw == 2;
    if (FITS32(in_total)) {
        if (db) TILE_LAUNCH(int, true, true);
        else if (relu) TILE_LAUNCH(int, true, false);
        else TILE_LAUNCH(int, false, false);
    } else {
        if (db) TILE_LAUNCH(int64_t, true, true);
        else if (relu) TILE_LAUNCH(int64_t, true, false);
        else TILE_LAUNCH(int64_t, false, false);
    }
#undef TILE_LAUNCH
    KERNEL_CHECK(e);
    if (db) {
        int64_t ch = g->c;
        k_chan_final_w<<<(unsigned)((ch * 32 + CU_THREADS - 1) / CU_THREADS), CU_THREADS, 0,
                         s>>>(part, ch, (int)grid, 0.0f, db);
        KERNEL_CHECK(e);
    }
    return VD_OK;
}

int cuk_pool_fwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x, float *y,
                 vd_dtype dt, vd_err *e) {
    int64_t total = (int64_t)g->n * g->c * g->oh * g->ow;
    if (total <= 0) return VD_OK;
    if (g->cl && pool8_ok(g, x, y)) DT_DISPATCH(dt, H, return pool_fwd8<H>(s, sm, g, x, y, e));
    int64_t in_total = (int64_t)g->n * g->c * g->h * g->w;
    CL_DISPATCH(g->cl, CL, DT_DISPATCH(dt, T, pool_fwd_launch<CL, T>(s, sm, g, AS<T>(x), AS<T>(y),
                                                                      total, in_total)));
    KERNEL_CHECK(e);
    return VD_OK;
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
                        window_max(xp, g.w, 1, h0, h1, w0, w1, &arg);
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

/* NCHW max pooling whose windows tile the input (cu_pool_tile_nchw_ok;
 * VGG's 2x2/2): one thread per output o, whose window's argmax it finds once
 * (window_max: the same rule) and whose window of dx it writes whole, each
 * element (beta ? dx : 0) plus dy[o] where it is the argmax -- the value and
 * the one rounding of k_pool_bwd_disjoint, which finds a window's argmax
 * once per element and divides per element. RELU (beta 0): then 0 where
 * x <= 0, as k_relu_bwd in place after it (x is the in-place ReLU's output):
 * the bits of the two kernels. */
template <bool RELU, typename I>
__global__ void k_pool_tile_nchw(cu_pool_geom g, const float *x, const float *dy, float *dx,
                                 float beta, I total) {
    const I plane_len = (I)g.h * g.w;
    GRID_STRIDE_T(I, o, total) {
        I row = o / g.ow;   /* plane * oh + oh */
        int ow = (int)(o - row * g.ow);
        I plane = row / g.oh;
        int oh = (int)(row - plane * g.oh);
        const float *xp = x + plane * plane_len;
        float *dxp = dx + plane * plane_len;
        int h0 = oh * g.kh, w0 = ow * g.kw, arg;
        window_max(xp, g.w, (I)1, h0, h0 + g.kh, w0, w0 + g.kw, &arg);
        float d = dy[o];
        for (int ih = h0; ih < h0 + g.kh; ih++)
            for (int iw = w0; iw < w0 + g.kw; iw++) {
                int i = ih * g.w + iw;
                float acc = beta != 0.0f ? dxp[i] : 0.0f;
                if (i == arg) acc += d;
                if (RELU && xp[i] <= 0.0f) acc = 0.0f;
                dxp[i] = acc;
            }
    }
}

bool cu_pool_tile_nchw_ok(const cu_pool_geom *g) {
    return !g->cl && g->max && !g->adaptive && g->kh > 0 && g->kw > 0 && g->sh == g->kh &&
           g->sw == g->kw && g->ph == 0 && g->pw == 0 && g->oh * g->kh == g->h &&
           g->ow * g->kw == g->w && FITS32((int64_t)g->h * g->w);
}

int cuk_pool_tile_nchw_bwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                           const float *dy, float *dx, float beta, bool relu, vd_err *e) {
    if (!cu_pool_tile_nchw_ok(g) || (relu && beta != 0.0f))
        return vd_errf(e, VD_EINTERNAL, "k_pool_tile_nchw: geometry or beta it does not take");
    int64_t total = (int64_t)g->n * g->c * g->oh * g->ow;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    bool i32 = FITS32((int64_t)g->n * g->c * g->h * g->w);
    if (relu && i32)
        k_pool_tile_nchw<true, int><<<gr, CU_THREADS, 0, s>>>(*g, x, dy, dx, beta, (int)total);
    else if (relu)
        k_pool_tile_nchw<true, int64_t><<<gr, CU_THREADS, 0, s>>>(*g, x, dy, dx, beta, total);
    else if (i32)
        k_pool_tile_nchw<false, int><<<gr, CU_THREADS, 0, s>>>(*g, x, dy, dx, beta, (int)total);
    else
        k_pool_tile_nchw<false, int64_t><<<gr, CU_THREADS, 0, s>>>(*g, x, dy, dx, beta, total);
    KERNEL_CHECK(e);
    return VD_OK;
}

int cuk_pool_bwd_general(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                         const float *dy, float *dx, float beta, vd_dtype dt, vd_err *e) {
    int64_t total = (int64_t)g->n * g->c * g->h * g->w;
    if (total <= 0) return VD_OK;
    int64_t out_total = (int64_t)g->n * g->c * g->oh * g->ow;
    CL_DISPATCH(g->cl, CL, DT_DISPATCH(dt, T, pool_bwd_launch<CL, T>(s, sm, g, AS<T>(x), AS<T>(dy),
                                                                      AS<T>(dx), beta, total,
                                                                      out_total)));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* NCHW: windows that tile the input: k_pool_tile_nchw; other disjoint
 * windows: k_pool_bwd_disjoint; other non-adaptive max pooling:
 * k_pool_bwd_tiled where pool_tiling_plan takes it; the rest (adaptive,
 * overlapping average pooling, huge planes or windows): k_pool_bwd. */
int cuk_pool_bwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x, const float *dy,
                 float *dx, float beta, void *ws, uint64_t ws_bytes, vd_dtype dt, vd_err *e) {
    int64_t total = (int64_t)g->n * g->c * g->h * g->w;
    if (total <= 0) return VD_OK;
    if (g->cl) {
        uint64_t need = cu_pool_bwd_ws_bytes(g);
        bool ok8 = pool8_ok(g, dy, dx) && al16(x) &&
                   (g->max ? need > 0 && ws && ws_bytes >= need && ((uintptr_t)ws & 7u) == 0
                           : true);
        /* windows that tile the input: one pass, no argmax workspace */
        if (cu_pool_tile_ok(g) && al16(x) && al16(dy) && al16(dx))
            return cuk_pool_tile_bwd(s, sm, g, x, dy, dx, beta, false, NULL, NULL, 0, dt, e);
        if (ok8) DT_DISPATCH(dt, H, return pool_bwd8<H>(s, sm, g, x, dy, dx, beta, ws, e));
        return cuk_pool_bwd_general(s, sm, g, x, dy, dx, beta, dt, e);
    }
    if (cu_pool_tile_nchw_ok(g))
        return cuk_pool_tile_nchw_bwd(s, sm, g, x, dy, dx, beta, false, e);
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
    bool tiled = false;
    int rc = cu_pool_bwd_tiled_auto(s, sm, g, x, dy, dx, beta, dt, &tiled, e);
    if (tiled) return rc;
    return cuk_pool_bwd_general(s, sm, g, x, dy, dx, beta, dt, e);
}

int cuk_pool_bwd_relu8(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                       const float *dy, float *dx, void *ws, uint64_t ws_bytes, vd_dtype dt,
                       bool *taken, vd_err *e) {
    *taken = false;
    uint64_t need = cu_pool_bwd_ws_bytes(g);
    if (!g->cl || !g->max || !pool8_ok(g, dy, dx) || !al16(x) || !need || !ws ||
        ws_bytes < need || ((uintptr_t)ws & 7u) != 0)
        return VD_OK;
    *taken = true;
    if ((int64_t)g->n * g->c * g->h * g->w <= 0) return VD_OK;
    DT_DISPATCH(dt, H, return pool_bwd8<H>(s, sm, g, x, dy, dx, 0.0f, ws, e, true));
    return VD_OK;
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
    g.cl = false;
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
