/* cuda_k_pool.h — what the pooling files share (cuda_k_pool.cu,
 * cuda_k_pool_tiled.cu): the window of an output, the outputs of an input,
 * and the max rule. Pooling is PyTorch's max_pool2d / avg_pool2d
 * (count_include_pad=True) / adaptive_{avg,max}_pool2d; global = adaptive
 * to 1x1. */
#ifndef VD_CUDA_K_POOL_H
#define VD_CUDA_K_POOL_H

#include "backend/cuda/cuda_kernels.h"

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
 * src holds the plane from row r0 and column c0 on, rows `pitch` pixels
 * apart, pixels cs elements apart (1; channels-last: the channel count):
 * window_max reads the plane itself, k_pool_bwd_tiled a copy of part of it
 * in shared memory -- the same values in the same order, so the same result
 * in either layout. I: the index type of the element offsets. */
template <typename T, typename I>
__device__ __forceinline__ float window_max_at(const T *src, int pitch, int r0, int c0, I cs,
                                               int w, int h0, int h1, int w0, int w1, int *arg) {
    float m = -INFINITY;
    int idx = h0 * w + w0;
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
            float v = ld(src[(I)((ih - r0) * pitch + (iw - c0)) * cs]);
            if (v > m || isnan(v)) { m = v; idx = ih * w + iw; }
        }
    *arg = idx;
    return m;
}

template <typename T, typename I>
__device__ __forceinline__ float window_max(const T *plane, int w, I cs, int h0, int h1, int w0,
                                            int w1, int *arg) {
    return window_max_at(plane, w, 0, 0, cs, w, h0, h1, w0, w1, arg);
}

/* Non-adaptive max-pool backward through k_pool_bwd_tiled where its tiling
 * takes g (automatic tile; cuda_k_pool_tiled.cu): *taken false and nothing
 * launched where it does not, else the launch's status. */
int cu_pool_bwd_tiled_auto(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                           const float *dy, float *dx, float beta, vd_dtype dt, bool *taken,
                           vd_err *e);

#endif
