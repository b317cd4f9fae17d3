/* cuda_kernels.h — what the kernel files (cuda_k_*.cu) share: element
 * loads and stores of the three feature-map types, the type dispatch, grid
 * sizing and grid-stride loops, fixed-order block reductions and the 16-byte
 * vector helpers. C++ / CUDA only; only the kernel files include it.
 *
 * Every kernel computes each output element independently (gather form, no
 * atomics), and every reduction runs in a fixed order, so results repeat bit
 * for bit run to run. Semantics follow PyTorch (see backend.h and the CPU
 * reference in src/backend/cpu). Launchers (declared in cuda_internal.h)
 * check every launch (KERNEL_CHECK) and return 0 or VD_EDEVICE. */
#ifndef VD_CUDA_KERNELS_H
#define VD_CUDA_KERNELS_H

#include <math.h>
#include "backend/cuda/cuda_internal.h"

/* Feature maps are float, bf16 or fp16 (math bf16 / fp16; backend.h's
 * vd_op_io.act): kernels that read or write them are templated on the
 * element type T and compute in float: ld() widens (exact), st() rounds to
 * nearest even (the only rounding the 16-bit formats add; fp16 overflows to
 * inf there, as IEEE's conversion does). Launchers take the float-typed
 * pointers of vd_op_io and the vd_dtype; DT_DISPATCH instantiates the kernel
 * for that type and AS<T>() reinterprets the pointers. With T = float every
 * kernel is the fp32 kernel it was, bit for bit. Only conversions are used on
 * the 16-bit types (no half / bf16 arithmetic), so sm_75 runs every kernel. */
__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ float ld(cu_bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ld(cu_f16 v) { return __half2float(v); }
__device__ __forceinline__ void st(float *p, float v) { *p = v; }
__device__ __forceinline__ void st(cu_bf16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void st(cu_f16 *p, float v) { *p = __float2half_rn(v); }
/* The layout is not the element type's: float maps are NCHW (math fp32) or
 * channels-last (tf32), 16-bit ones channels-last. Kernels whose indexing
 * depends on it take a template flag CL (true: NHWC) and their launchers a
 * bool cl (vd_math_nhwc of the math; cu_layer.cl); CL_DISPATCH turns the
 * one into the other. */
#define CL_DISPATCH(cl, CL, ...)                                                   \
    do {                                                                           \
        if (cl) { const bool CL = true; __VA_ARGS__; }                             \
        else { const bool CL = false; __VA_ARGS__; }                               \
    } while (0)
template <typename T> static inline const T *AS(const float *p) { return (const T *)(const void *)p; }
template <typename T> static inline T *AS(float *p) { return (T *)(void *)p; }

/* Run the statements with T the element type of dt: float (VD_DT_F32),
 * cu_bf16 or cu_f16. HALF_DISPATCH: one of the two 16-bit types (dt must be
 * one). */
#define DT_DISPATCH(dt, T, ...)                                                    \
    do {                                                                           \
        switch (dt) {                                                              \
        case VD_DT_BF16: { typedef cu_bf16 T; __VA_ARGS__; } break;                \
        case VD_DT_F16: { typedef cu_f16 T; __VA_ARGS__; } break;                  \
        default: { typedef float T; __VA_ARGS__; } break;                          \
        }                                                                          \
    } while (0)
#define HALF_DISPATCH(dt, T, ...)                                                  \
    do {                                                                           \
        if ((dt) == VD_DT_F16) { typedef cu_f16 T; __VA_ARGS__; }                  \
        else { typedef cu_bf16 T; __VA_ARGS__; }                                   \
    } while (0)

enum { CU_THREADS = 256 };

/* Grid for a grid-stride loop over n elements. */
static inline unsigned grid_for(int64_t n, int sm) {
    int64_t b = (n + CU_THREADS - 1) / CU_THREADS;
    int64_t cap = (int64_t)(sm > 0 ? sm : 132) * 16;
    if (b > cap) b = cap;
    if (b < 1) b = 1;
    return (unsigned)b;
}

#define GRID_STRIDE(i, n)                                                          \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);     \
         i += (int64_t)gridDim.x * blockDim.x)

/* Same with index type I: kernels whose index math divides are templated on
 * I and launched with int when every index fits (FITS32), since 64-bit
 * integer division costs several times more than 32-bit on the GPU. The
 * bound leaves room for i + stride (grid_for caps the grid) not to wrap. */
#define GRID_STRIDE_T(I, i, n)                                                     \
    for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); i < (n);                \
         i += (I)(gridDim.x * blockDim.x))
#define FITS32(n) ((n) < ((int64_t)1 << 30))

/* dx_beta: 0 overwrites (old contents, even NaN, ignored), otherwise adds. */
template <typename T>
__device__ __forceinline__ void put(T *dst, float beta, float v) {
    st(dst, beta != 0.0f ? __fadd_rn(ld(*dst), v) : v);
}

/* Fixed-order block sum of v over blockDim.x (a power of two <= 1024)
 * threads; result valid in thread 0. sh has blockDim.x floats. */
__device__ inline float block_sum(float v, float *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

__device__ inline float block_max(float v, float *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

/* ---- 16-bit elements in 16-byte vectors -------------------------------------
 * Eight bf16 or fp16 per thread through one 16-byte load or store, where
 * every pointer is 16-byte aligned and the count a multiple of 8 (the pool's
 * tensors are 256-byte aligned; channel counts of real nets are multiples of
 * 8). The same float arithmetic per element and the same rounding
 * (__floats2bfloat162_rn / __floats2half2_rn = the scalar conversion twice)
 * as the scalar kernels, so results are bit-identical to them. Kernels on
 * these are templated on the 16-bit type H; the channels-last ones (batch
 * norm, bias and its gradient, pooling) also take H = float (tf32's maps:
 * eight floats in two 16-byte loads, under the same conditions). */
struct bf8 { float v[8]; };

/* The inputs of an n-ary kernel (add, the batch norm + add fusion), passed
 * by value in the kernel's parameters. */
template <typename T> struct cu_ptrs { const T *p[VD_MAX_INPUTS]; };

__device__ __forceinline__ bf8 ld8(const float *p) {
    float4 a = ((const float4 *)(const void *)p)[0], b = ((const float4 *)(const void *)p)[1];
    bf8 r = {{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
    return r;
}

__device__ __forceinline__ void st8(float *p, const bf8 &r) {
    ((float4 *)(void *)p)[0] = make_float4(r.v[0], r.v[1], r.v[2], r.v[3]);
    ((float4 *)(void *)p)[1] = make_float4(r.v[4], r.v[5], r.v[6], r.v[7]);
}

/* The pair type of H. */
template <typename H> struct Pair2;
template <> struct Pair2<cu_bf16> { typedef __nv_bfloat162 t; };
template <> struct Pair2<cu_f16> { typedef __half2 t; };
__device__ __forceinline__ float2 to_f2(__nv_bfloat162 h) { return __bfloat1622float2(h); }
__device__ __forceinline__ float2 to_f2(__half2 h) { return __half22float2(h); }
__device__ __forceinline__ void of_f2(__nv_bfloat162 *h, float a, float b) { *h = __floats2bfloat162_rn(a, b); }
__device__ __forceinline__ void of_f2(__half2 *h, float a, float b) { *h = __floats2half2_rn(a, b); }

template <typename H>
__device__ __forceinline__ bf8 ld8(const H *p) {
    uint4 u = *(const uint4 *)(const void *)p;
    const typename Pair2<H>::t *h = (const typename Pair2<H>::t *)(const void *)&u;
    bf8 r;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float2 t = to_f2(h[k]);
        r.v[2 * k] = t.x;
        r.v[2 * k + 1] = t.y;
    }
    return r;
}

template <typename H>
__device__ __forceinline__ void st8(H *p, const bf8 &r) {
    uint4 u;
    typename Pair2<H>::t *h = (typename Pair2<H>::t *)(void *)&u;
#pragma unroll
    for (int k = 0; k < 4; k++) of_f2(&h[k], r.v[2 * k], r.v[2 * k + 1]);
    *(uint4 *)(void *)p = u;
}

/* put() on eight: beta != 0 adds to what dst holds (float, one rounding). */
template <typename H>
__device__ __forceinline__ void put8(H *p, float beta, bf8 r) {
    if (beta != 0.0f) {
        bf8 o = ld8(p);
#pragma unroll
        for (int k = 0; k < 8; k++) r.v[k] = __fadd_rn(o.v[k], r.v[k]);
    }
    st8(p, r);
}

static inline bool al16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
static inline bool vec8_ok(int64_t n, const void *a, const void *b = NULL, const void *c = NULL) {
    return n % 8 == 0 && al16(a) && (!b || al16(b)) && (!c || al16(c));
}

#define GRID_STRIDE8(i, n)                                                         \
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < (n);\
         i += (int64_t)gridDim.x * blockDim.x * 8)

/* fp32 in 16-byte vectors: four floats per thread where the count is a
 * multiple of 4 and the pointers 16-byte aligned; the same arithmetic per
 * element as the scalar kernels (bit-identical). */
#define GRID_STRIDE4(i, n)                                                         \
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < (n);\
         i += (int64_t)gridDim.x * blockDim.x * 4)

static inline bool vec4_ok(int64_t n, const void *a, const void *b = NULL, const void *c = NULL) {
    return n % 4 == 0 && al16(a) && (!b || al16(b)) && (!c || al16(c));
}

__device__ __forceinline__ void put4(float *p, float beta, float4 v) {
    if (beta != 0.0f) {
        float4 o = *(const float4 *)p;
        v.x = __fadd_rn(o.x, v.x); v.y = __fadd_rn(o.y, v.y);
        v.z = __fadd_rn(o.z, v.z); v.w = __fadd_rn(o.w, v.w);
    }
    *(float4 *)p = v;
}

__device__ __forceinline__ float relu1(float v) { return v <= 0.0f ? 0.0f : v; }

#endif
