/* cuda_kernels.cu — the CUDA backend's own kernels and their launchers.
 *
 * Every kernel computes each output element independently (gather form, no
 * atomics), and every reduction runs in a fixed order, so results repeat bit
 * for bit run to run. Semantics follow PyTorch (see backend.h and the CPU
 * reference in src/backend/cpu). Launchers check the launch (KERNEL_CHECK)
 * and return 0 or VD_EDEVICE. */
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
/* 16-bit feature maps are channels-last (vd_math_nhwc): NHWC<T> says which
 * layout a kernel of element type T indexes. */
template <typename T> struct NHWC { static const bool on = false; };
template <> struct NHWC<cu_bf16> { static const bool on = true; };
template <> struct NHWC<cu_f16> { static const bool on = true; };
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
static unsigned grid_for(int64_t n, int sm) {
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
__device__ float block_sum(float v, float *sh) {
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

__device__ float block_max(float v, float *sh) {
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
 * these are templated on the 16-bit type H. */
struct bf8 { float v[8]; };

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

static bool al16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
static bool vec8_ok(int64_t n, const void *a, const void *b = NULL, const void *c = NULL) {
    return n % 8 == 0 && al16(a) && (!b || al16(b)) && (!c || al16(c));
}

#define GRID_STRIDE8(i, n)                                                         \
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < (n);\
         i += (int64_t)gridDim.x * blockDim.x * 8)

template <typename H>
__global__ void k_relu_fwd8(const H *x, H *y, int64_t n) {
    GRID_STRIDE8(i, n) {
        bf8 v = ld8(x + i);
#pragma unroll
        for (int k = 0; k < 8; k++) v.v[k] = v.v[k] <= 0.0f ? 0.0f : v.v[k];
        st8(y + i, v);
    }
}

template <typename H>
__global__ void k_relu_bwd8(const H *y, const H *dy, H *dx, float beta,
                            int64_t n) {
    GRID_STRIDE8(i, n) {
        bf8 a = ld8(y + i), g = ld8(dy + i);
#pragma unroll
        for (int k = 0; k < 8; k++) g.v[k] = a.v[k] <= 0.0f ? 0.0f : g.v[k];
        put8(dx + i, beta, g);
    }
}

template <typename H> struct cu_ptrs8 { const H *p[VD_MAX_INPUTS]; };

template <typename H>
__global__ void k_add8(cu_ptrs8<H> x, int kin, H *y, int64_t n) {
    GRID_STRIDE8(i, n) {
        bf8 acc = ld8(x.p[0] + i);
        for (int j = 1; j < kin; j++) {
            bf8 b = ld8(x.p[j] + i);
#pragma unroll
            for (int k = 0; k < 8; k++) acc.v[k] = __fadd_rn(acc.v[k], b.v[k]);
        }
        st8(y + i, acc);
    }
}

/* channels-last: elements i..i+7 are channels i % ch .. +7 of one pixel */
template <typename H>
__global__ void k_bias_add8(H *y, const float *b, int64_t n, int64_t ch) {
    GRID_STRIDE8(i, n) {
        bf8 v = ld8(y + i);
        int64_t c = i % ch;
#pragma unroll
        for (int k = 0; k < 8; k++) v.v[k] = __fadd_rn(v.v[k], b[c + k]);
        st8(y + i, v);
    }
}

template <typename H>
__global__ void k_axpby_copy8(const H *src, H *dst, float beta, int64_t n) {
    GRID_STRIDE8(i, n) put8(dst + i, beta, ld8(src + i));
}


/* fp32 in 16-byte vectors: four floats per thread where the count is a
 * multiple of 4 and the pointers 16-byte aligned; the same arithmetic per
 * element as the scalar kernels (bit-identical). */
#define GRID_STRIDE4(i, n)                                                         \
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < (n);\
         i += (int64_t)gridDim.x * blockDim.x * 4)

static bool vec4_ok(int64_t n, const void *a, const void *b = NULL, const void *c = NULL) {
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

__global__ void k_relu_fwd4(const float *x, float *y, int64_t n) {
    GRID_STRIDE4(i, n) {
        float4 v = *(const float4 *)(x + i);
        v.x = relu1(v.x); v.y = relu1(v.y); v.z = relu1(v.z); v.w = relu1(v.w);
        *(float4 *)(y + i) = v;
    }
}

__global__ void k_relu_bwd4(const float *y, const float *dy, float *dx, float beta, int64_t n) {
    GRID_STRIDE4(i, n) {
        float4 a = *(const float4 *)(y + i), g = *(const float4 *)(dy + i);
        g.x = a.x <= 0.0f ? 0.0f : g.x; g.y = a.y <= 0.0f ? 0.0f : g.y;
        g.z = a.z <= 0.0f ? 0.0f : g.z; g.w = a.w <= 0.0f ? 0.0f : g.w;
        put4(dx + i, beta, g);
    }
}

struct cu_fptrs4 { const float *p[VD_MAX_INPUTS]; };

__global__ void k_add4(cu_fptrs4 x, int kin, float *y, int64_t n) {
    GRID_STRIDE4(i, n) {
        float4 acc = *(const float4 *)(x.p[0] + i);
        for (int j = 1; j < kin; j++) {
            float4 b = *(const float4 *)(x.p[j] + i);
            acc.x = __fadd_rn(acc.x, b.x); acc.y = __fadd_rn(acc.y, b.y);
            acc.z = __fadd_rn(acc.z, b.z); acc.w = __fadd_rn(acc.w, b.w);
        }
        *(float4 *)(y + i) = acc;
    }
}

__global__ void k_axpby_copy4(const float *src, float *dst, float beta, int64_t n) {
    GRID_STRIDE4(i, n) put4(dst + i, beta, *(const float4 *)(src + i));
}

/* ---- fills (profiler) ----------------------------------------------------- */
__global__ void k_fill_uniform(float *p, int64_t n, uint64_t seed, float lo, float hi,
                               bool halves) {
    GRID_STRIDE(i, n) {
        float v = lo + (hi - lo) * vd_hash_uniform(seed, 0, 0, (uint64_t)i);
        if (halves) {
            unsigned u = __float_as_uint(v);
            v = __uint_as_float((u & 0xFFFF0000u) | (u >> 16));
        }
        p[i] = v;
    }
}

int cuk_fill_uniform(cudaStream_t s, int sm, float *p, int64_t n, uint64_t seed, float lo,
                     float hi, vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    k_fill_uniform<<<grid_for(n, sm), CU_THREADS, 0, s>>>(p, n, seed, lo, hi, dt != VD_DT_F32);
    KERNEL_CHECK(e);
    return VD_OK;
}

__global__ void k_fill_labels(int32_t *p, int64_t n, int classes) {
    GRID_STRIDE(i, n) p[i] = (int32_t)(i % classes);
}

int cuk_fill_labels(cudaStream_t s, int sm, int32_t *p, int64_t n, int classes, vd_err *e) {
    if (n <= 0) return VD_OK;
    k_fill_labels<<<grid_for(n, sm), CU_THREADS, 0, s>>>(p, n, classes);
    KERNEL_CHECK(e);
    return VD_OK;
}

__global__ void k_empty(void) {}

int cuk_empty(cudaStream_t s, vd_err *e) {
    k_empty<<<1, 32, 0, s>>>();
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- bias ------------------------------------------------------------------ */
template <typename T, typename I>
__global__ void k_bias_add(T *y, const float *b, I total, I ch, I hw) {
    GRID_STRIDE_T(I, i, total)
        st(&y[i], __fadd_rn(ld(y[i]), b[NHWC<T>::on ? i % ch : (i / hw) % ch]));
}

int cuk_bias_add(cudaStream_t s, int sm, float *y, const float *b, int64_t n, int64_t ch,
                 int64_t hw, vd_dtype dt, vd_err *e) {
    int64_t total = n * ch * hw;
    if (total <= 0) return VD_OK;
    if (dt != VD_DT_F32 && ch % 8 == 0 && vec8_ok(total, y)) {
        HALF_DISPATCH(dt, H, k_bias_add8<H><<<grid_for(total / 8, sm), CU_THREADS, 0, s>>>(
                                 AS<H>(y), b, total, ch));
        KERNEL_CHECK(e);
        return VD_OK;
    }
    unsigned gr = grid_for(total, sm);
    if (FITS32(total))
        DT_DISPATCH(dt, T, k_bias_add<T, int><<<gr, CU_THREADS, 0, s>>>(AS<T>(y), b, (int)total,
                                                                       (int)ch, (int)hw));
    else
        DT_DISPATCH(dt, T, k_bias_add<T, int64_t><<<gr, CU_THREADS, 0, s>>>(AS<T>(y), b, total, ch, hw));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- direct convolution (first layers) -----------------------------------
 * A conv whose output values each read few inputs (P = C*R*S: VGG-16's
 * features.0 reads 27) does little arithmetic per output byte, and cuDNN's
 * engines for it run far from the memory bound: VGG-16 b256 features.0
 * forward took 3.6 ms (+1.3 ms for a separate bias pass) for 3 GiB of
 * output that the H200 writes in 0.7 ms. Here each thread computes one
 * output pixel for CU_DIRECT_KB output channels at a time: the P inputs of
 * its window (loaded again per channel block, from L1), times the weights
 * of those channels, which every thread of the block reads from shared
 * memory at the same address (a broadcast); the bias is the accumulators'
 * start. The sum runs over (c, r, s) in order, in fp32 (also under tf32:
 * more exact than tensor cores, never less). */
bool cuk_conv_direct_ok(const cu_direct_geom *g) {
    int64_t P = (int64_t)g->c * g->r * g->s;
    int64_t kp = ((int64_t)g->k + CU_DIRECT_KB - 1) / CU_DIRECT_KB * CU_DIRECT_KB;
    /* weights and bias in the default 48 KiB of shared memory */
    return g->c >= 1 && g->c <= CU_DIRECT_MAX_C && P <= CU_DIRECT_MAX_P && g->k >= 1 &&
           (P + 1) * kp * (int64_t)sizeof(float) <= 48 * 1024 && g->n >= 1 && g->oh >= 1 && g->ow >= 1 &&
           (int64_t)g->n * g->k * g->oh * g->ow < ((int64_t)1 << 40) &&
           (int64_t)g->c * g->h * g->w < ((int64_t)1 << 31) &&
           (int64_t)g->k * g->oh * g->ow < ((int64_t)1 << 31);
}

__global__ void __launch_bounds__(CU_THREADS)
k_conv_direct_fwd(const float *__restrict__ x, const float *__restrict__ w,
                  const float *__restrict__ b, float *__restrict__ y, cu_direct_geom g, int kp,
                  bool relu) {
    extern __shared__ float4 smem4[];
    float *ws = (float *)smem4;                 /* [P][kp]: weight (k, j) at j * kp + k */
    float *bs = ws + (size_t)g.c * g.r * g.s * kp;   /* [kp] */
    const int P = g.c * g.r * g.s;
    for (int i = threadIdx.x; i < P * kp; i += blockDim.x) {
        int j = i / kp, k = i - j * kp;
        ws[i] = k < g.k ? w[(int64_t)k * P + j] : 0.0f;
    }
    for (int k = threadIdx.x; k < kp; k += blockDim.x) bs[k] = b && k < g.k ? b[k] : 0.0f;
    __syncthreads();
    const int ohw = g.oh * g.ow;
    const int64_t npix = (int64_t)g.n * ohw, chw = (int64_t)g.c * g.h * g.w;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < npix;
         p += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = p / ohw;
        int rem = (int)(p - n * ohw);
        int oh = rem / g.ow, ow = rem - oh * g.ow;
        int ih0 = oh * g.sh - g.ph, iw0 = ow * g.sw - g.pw;
        const float *xn = x + n * chw;
        float *yp = y + n * (int64_t)g.k * ohw + rem;
        for (int kb = 0; kb < kp; kb += CU_DIRECT_KB) {
            float acc[CU_DIRECT_KB];
#pragma unroll
            for (int q = 0; q < CU_DIRECT_KB; q++) acc[q] = bs[kb + q];
            int j = 0;
            for (int c = 0; c < g.c; c++)
                for (int r = 0; r < g.r; r++) {
                    int ih = ih0 + r * g.dh;
                    bool rok = ih >= 0 && ih < g.h;
                    const float *xr = xn + ((int64_t)c * g.h + ih) * g.w;
                    for (int s = 0; s < g.s; s++, j++) {
                        int iw = iw0 + s * g.dw;
                        float xv = rok && iw >= 0 && iw < g.w ? __ldg(xr + iw) : 0.0f;
                        const float4 *wr = (const float4 *)(ws + (size_t)j * kp + kb);
#pragma unroll
                        for (int q = 0; q < CU_DIRECT_KB / 4; q++) {
                            float4 wv = wr[q];
                            acc[4 * q] = fmaf(wv.x, xv, acc[4 * q]);
                            acc[4 * q + 1] = fmaf(wv.y, xv, acc[4 * q + 1]);
                            acc[4 * q + 2] = fmaf(wv.z, xv, acc[4 * q + 2]);
                            acc[4 * q + 3] = fmaf(wv.w, xv, acc[4 * q + 3]);
                        }
                    }
                }
#pragma unroll
            for (int q = 0; q < CU_DIRECT_KB; q++)
                if (kb + q < g.k) yp[(int64_t)(kb + q) * ohw] = relu ? relu1(acc[q]) : acc[q];
        }
    }
}

int cuk_conv_direct_fwd(cudaStream_t s, int sm, const cu_direct_geom *g, const float *x,
                        const float *w, const float *b, float *y, bool relu, vd_err *e) {
    if (!cuk_conv_direct_ok(g))
        return vd_errf(e, VD_EINTERNAL, "direct conv: geometry out of range (c %d, %dx%d, k %d)",
                       g->c, g->r, g->s, g->k);
    int kp = (g->k + CU_DIRECT_KB - 1) / CU_DIRECT_KB * CU_DIRECT_KB;
    size_t shmem = ((size_t)g->c * g->r * g->s + 1) * (size_t)kp * sizeof(float);
    int64_t npix = (int64_t)g->n * g->oh * g->ow;
    /* a few blocks per SM: each block loads the weights once */
    int64_t blocks = (npix + CU_THREADS - 1) / CU_THREADS, cap = (int64_t)(sm > 0 ? sm : 132) * 8;
    if (blocks > cap) blocks = cap;
    k_conv_direct_fwd<<<(unsigned)blocks, CU_THREADS, shmem, s>>>(x, w, b, y, *g, kp, relu);
    KERNEL_CHECK(e);
    return VD_OK;
}

int cu_chan_split(int64_t n, int64_t ch, int64_t hw, int sm_count, bool nhwc) {
    if (nhwc) {   /* blocks of CHAN_NHWC_C channels: about sm*8 blocks in all */
        int64_t cb = (ch + 31) / 32;
        int64_t want = ((int64_t)(sm_count > 0 ? sm_count : 132) * 8 + cb - 1) / cb;
        int64_t most = (n * hw) / 1024;
        int64_t sp = want < most ? want : most;
        if (sp > 1024) sp = 1024;
        return sp < 1 ? 1 : (int)sp;
    }
    int64_t want = ((int64_t)(sm_count > 0 ? sm_count : 132) * 4 + ch - 1) / ch;
    int64_t most = (n * hw) / 8192;           /* at least 8192 elements per block */
    int64_t sp = want < most ? want : most;
    if (sp > 1024) sp = 1024;
    if (sp < 1) sp = 1;
    return (int)sp;
}

/* Block (c, k): sums elements j in chunk k of [0, n*hw) of channel c. */
template <typename T, typename I>
__global__ void k_chan_partial(const T *dy, I n, I ch, I hw, int split, float *out) {
    __shared__ float sh[CU_THREADS];
    I c = (I)blockIdx.x, k = (I)blockIdx.y;
    I total = n * hw;
    I chunk = (total + split - 1) / split;
    I j0 = k * chunk, j1 = j0 + chunk < total ? j0 + chunk : total;
    float acc = 0.0f;
    for (I j = j0 + (I)threadIdx.x; j < j1; j += (I)blockDim.x) {
        I img = j / hw, p = j - img * hw;
        acc += ld(dy[(img * ch + c) * hw + p]);
    }
    float r = block_sum(acc, sh);
    if (threadIdx.x == 0) out[c * split + k] = r;
}

/* Channels-last: block (cb, k) sums pixels of chunk k of [0, n*hw) for
 * channels [32 cb, 32 cb + 32): thread (lane, row) takes channel 32 cb + lane
 * and every CU_THREADS/32-th pixel from its row; rows are then added in
 * order. Coalesced across the channels of a pixel. */
enum { CHAN_NHWC_C = 32 };
template <typename H>
__global__ void k_chan_partial_nhwc(const H *dy, int64_t pix, int64_t ch, int split,
                                    float *out) {
    __shared__ float sh[CU_THREADS];
    const int lane = threadIdx.x % CHAN_NHWC_C, row = threadIdx.x / CHAN_NHWC_C;
    const int rows = blockDim.x / CHAN_NHWC_C;
    int64_t c = (int64_t)blockIdx.x * CHAN_NHWC_C + lane, k = blockIdx.y;
    int64_t chunk = (pix + split - 1) / split;
    int64_t j0 = k * chunk, j1 = j0 + chunk < pix ? j0 + chunk : pix;
    float acc = 0.0f;
    if (c < ch)
        for (int64_t j = j0 + row; j < j1; j += rows) acc += ld(dy[j * ch + c]);
    sh[threadIdx.x] = acc;
    __syncthreads();
    if (row == 0 && c < ch) {
        float t = sh[lane];
        for (int r = 1; r < rows; r++) t += sh[r * CHAN_NHWC_C + lane];
        out[c * split + k] = t;
    }
}

__global__ void k_chan_final(const float *partial, int64_t ch, int split, float *db) {
    GRID_STRIDE(c, ch) {
        float acc = 0.0f;
        for (int k = 0; k < split; k++) acc += partial[c * split + k];
        db[c] = acc;
    }
}

static int chan_sum8(cudaStream_t s, const float *dy, int64_t pix, int64_t ch, int split,
                     float *partial, float *db, vd_dtype dt, vd_err *e);

int cuk_chan_sum(cudaStream_t s, const float *dy, int64_t n, int64_t ch, int64_t hw, int split,
                 float *partial, float *db, vd_dtype dt, vd_err *e) {
    if (ch <= 0) return VD_OK;
    if (ch > 0x7fffffff || split < 1 || split > 65535)
        return vd_errf(e, VD_EINTERNAL, "cuk_chan_sum: bad shape (channels %lld, split %d)",
                       (long long)ch, split);
    dim3 grid((unsigned)ch, (unsigned)split);
    float *out = split == 1 ? db : partial;
    if (dt != VD_DT_F32 && ch % 8 == 0 && ((uintptr_t)dy & 15u) == 0)
        return chan_sum8(s, dy, n * hw, ch, split, partial, db, dt, e);
    if (dt != VD_DT_F32) {
        dim3 gn((unsigned)((ch + CHAN_NHWC_C - 1) / CHAN_NHWC_C), (unsigned)split);
        HALF_DISPATCH(dt, H, k_chan_partial_nhwc<H><<<gn, CU_THREADS, 0, s>>>(AS<H>(dy), n * hw, ch,
                                                                            split, out));
    } else if (FITS32(n * ch * hw + (int64_t)split * CU_THREADS)) {
        k_chan_partial<float, int><<<grid, CU_THREADS, 0, s>>>(dy, (int)n, (int)ch, (int)hw, split, out);
    } else {
        k_chan_partial<float, int64_t><<<grid, CU_THREADS, 0, s>>>(dy, n, ch, hw, split, out);
    }
    KERNEL_CHECK(e);
    if (split > 1) {
        k_chan_final<<<grid_for(ch, 132), CU_THREADS, 0, s>>>(partial, ch, split, db);
        KERNEL_CHECK(e);
    }
    return VD_OK;
}

/* db[j] = sum over rows i of dy[i, j] (fc bias gradient), rows in order. */
template <typename T>
__global__ void k_col_sum(const T *dy, int64_t n, int64_t cols, float *db) {
    GRID_STRIDE(j, cols) {
        float acc = 0.0f;
        for (int64_t i = 0; i < n; i++) acc += ld(dy[i * cols + j]);
        db[j] = acc;
    }
}

int cuk_col_sum(cudaStream_t s, const float *dy, int64_t n, int64_t cols, float *db, vd_dtype dt,
                vd_err *e) {
    if (cols <= 0) return VD_OK;
    DT_DISPATCH(dt, T, k_col_sum<T><<<grid_for(cols, 132), CU_THREADS, 0, s>>>(AS<T>(dy), n, cols, db));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* BN in eval mode: aux = [running_mean, 1/sqrt(running_var + eps)] (what
 * the CPU reference leaves in aux; nothing reads it in eval). */
__global__ void k_bn_eval_aux(const float *rm, const float *rv, float *aux, int ch, float eps) {
    GRID_STRIDE(c, ch) {
        aux[c] = rm[c];
        aux[ch + c] = (float)(1.0 / sqrt((double)rv[c] + (double)eps));
    }
}

int cuk_bn_eval_aux(cudaStream_t s, const float *rm, const float *rv, float *aux, int ch,
                    float eps, vd_err *e) {
    if (ch <= 0) return VD_OK;
    k_bn_eval_aux<<<grid_for(ch, 132), CU_THREADS, 0, s>>>(rm, rv, aux, ch, eps);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- elementwise ------------------------------------------------------------ */
template <typename T>
__global__ void k_relu_fwd(const T *x, T *y, int64_t n) {
    GRID_STRIDE(i, n) {
        float v = ld(x[i]);
        st(&y[i], v <= 0.0f ? 0.0f : v);   /* NaN propagates, as torch.relu */
    }
}

int cuk_relu_fwd(cudaStream_t s, int sm, const float *x, float *y, int64_t n, vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    if (dt != VD_DT_F32 && vec8_ok(n, x, y))
        HALF_DISPATCH(dt, H, k_relu_fwd8<H><<<grid_for(n / 8, sm), CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(y), n));
    else if (dt == VD_DT_F32 && vec4_ok(n, x, y))
        k_relu_fwd4<<<grid_for(n / 4, sm), CU_THREADS, 0, s>>>(x, y, n);
    else DT_DISPATCH(dt, T, k_relu_fwd<T><<<grid_for(n, sm), CU_THREADS, 0, s>>>(AS<T>(x), AS<T>(y), n));
    KERNEL_CHECK(e);
    return VD_OK;
}

template <typename T>
__global__ void k_relu_bwd(const T *y, const T *dy, T *dx, float beta, int64_t n) {
    GRID_STRIDE(i, n) {
        float g = ld(y[i]) <= 0.0f ? 0.0f : ld(dy[i]);
        put(&dx[i], beta, g);
    }
}

int cuk_relu_bwd(cudaStream_t s, int sm, const float *y, const float *dy, float *dx, float beta,
                 int64_t n, vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    if (dt != VD_DT_F32 && vec8_ok(n, y, dy, dx))
        HALF_DISPATCH(dt, H, k_relu_bwd8<H><<<grid_for(n / 8, sm), CU_THREADS, 0, s>>>(
                                 AS<H>(y), AS<H>(dy), AS<H>(dx), beta, n));
    else if (dt == VD_DT_F32 && vec4_ok(n, y, dy, dx))
        k_relu_bwd4<<<grid_for(n / 4, sm), CU_THREADS, 0, s>>>(y, dy, dx, beta, n);
    else DT_DISPATCH(dt, T, k_relu_bwd<T><<<grid_for(n, sm), CU_THREADS, 0, s>>>(
                                AS<T>(y), AS<T>(dy), AS<T>(dx), beta, n));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* GELU, erf form (torch.nn.GELU(), approximate='none'), in float as PyTorch's
 * CUDA kernel: y = x/2 (1 + erf(x/sqrt 2)); dx (+)= dy (Phi(x) + x phi(x)). */
template <typename T>
__global__ void k_gelu_fwd(const T *x, T *y, int64_t n) {
    GRID_STRIDE(i, n) {
        float v = ld(x[i]);
        st(&y[i], 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
    }
}

int cuk_gelu_fwd(cudaStream_t s, int sm, const float *x, float *y, int64_t n, vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    DT_DISPATCH(dt, T, k_gelu_fwd<T><<<grid_for(n, sm), CU_THREADS, 0, s>>>(AS<T>(x), AS<T>(y), n));
    KERNEL_CHECK(e);
    return VD_OK;
}

template <typename T>
__global__ void k_gelu_bwd(const T *x, const T *dy, T *dx, float beta, int64_t n) {
    GRID_STRIDE(i, n) {
        float v = ld(x[i]);
        float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
        float pdf = 0.39894228040143268f * expf(-0.5f * v * v);   /* 1/sqrt(2 pi) */
        put(&dx[i], beta, ld(dy[i]) * (cdf + v * pdf));
    }
}

int cuk_gelu_bwd(cudaStream_t s, int sm, const float *x, const float *dy, float *dx, float beta,
                 int64_t n, vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    DT_DISPATCH(dt, T, k_gelu_bwd<T><<<grid_for(n, sm), CU_THREADS, 0, s>>>(AS<T>(x), AS<T>(dy),
                                                                           AS<T>(dx), beta, n));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* y[i] (+)= keep(i) ? x[i] * scale : 0, keep iff hash >= p. Forward (beta 0)
 * and backward (x = dy, y = dx) are the same map. */
template <typename T>
__global__ void k_dropout(const T *x, T *y, float beta, int64_t n, float p, float scale,
                          uint64_t seed, uint64_t layer, uint64_t iter, int64_t ch, int64_t hw) {
    GRID_STRIDE(i, n) {
        int64_t m = i;   /* the mask is drawn by NCHW index in every layout */
        if (NHWC<T>::on && hw > 1) {
            int64_t pix = i / ch, c = i - pix * ch, img = pix / hw;
            m = (img * ch + c) * hw + (pix - img * hw);
        }
        bool keep = vd_hash_uniform(seed, layer, iter, (uint64_t)m) >= p;
        float v = keep ? __fmul_rn(ld(x[i]), scale) : 0.0f;
        put(&y[i], beta, v);
    }
}

int cuk_dropout(cudaStream_t s, int sm, const float *x, float *y, float beta, int64_t n, float p,
                float scale, uint64_t seed, uint64_t layer, uint64_t iter, int64_t ch, int64_t hw,
                vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    DT_DISPATCH(dt, T, k_dropout<T><<<grid_for(n, sm), CU_THREADS, 0, s>>>(
                           AS<T>(x), AS<T>(y), beta, n, p, scale, seed, layer, iter, ch, hw));
    KERNEL_CHECK(e);
    return VD_OK;
}

template <typename T>
__global__ void k_axpby_copy(const T *src, T *dst, float beta, int64_t n) {
    GRID_STRIDE(i, n) put(&dst[i], beta, ld(src[i]));
}

int cuk_axpby_copy(cudaStream_t s, int sm, const float *src, float *dst, float beta, int64_t n,
                   vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    if (dt != VD_DT_F32 && vec8_ok(n, src, dst))
        HALF_DISPATCH(dt, H, k_axpby_copy8<H><<<grid_for(n / 8, sm), CU_THREADS, 0, s>>>(
                                 AS<H>(src), AS<H>(dst), beta, n));
    else if (dt == VD_DT_F32 && vec4_ok(n, src, dst))
        k_axpby_copy4<<<grid_for(n / 4, sm), CU_THREADS, 0, s>>>(src, dst, beta, n);
    else DT_DISPATCH(dt, T, k_axpby_copy<T><<<grid_for(n, sm), CU_THREADS, 0, s>>>(
                                AS<T>(src), AS<T>(dst), beta, n));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* dst[i] = sum over j < n of src[j * m + i], j in order (deterministic):
 * the per-sample partial weight gradients of the 1x1 GEMM backward-filter */
__global__ void k_sum_batch(const float *__restrict__ src, int64_t n, int64_t m,
                            float *__restrict__ dst) {
    GRID_STRIDE(i, m) {
        float acc = 0.0f;
        for (int64_t j = 0; j < n; j++) acc = __fadd_rn(acc, src[j * m + i]);
        dst[i] = acc;
    }
}

int cuk_sum_batch(cudaStream_t s, int sm, const float *src, int64_t n, int64_t m, float *dst,
                  vd_err *e) {
    if (m <= 0) return VD_OK;
    k_sum_batch<<<grid_for(m, sm), CU_THREADS, 0, s>>>(src, n, m, dst);
    KERNEL_CHECK(e);
    return VD_OK;
}

template <typename T> struct cu_ptrs { const T *p[VD_MAX_INPUTS]; };

/* y = ((x0 + x1) + x2) + ... (in float; 16-bit: one rounding at the end) */
template <typename T>
__global__ void k_add(cu_ptrs<T> x, int k, T *y, int64_t n) {
    GRID_STRIDE(i, n) {
        float acc = ld(x.p[0][i]);
        for (int j = 1; j < k; j++) acc = __fadd_rn(acc, ld(x.p[j][i]));
        st(&y[i], acc);
    }
}

/* k_add8 on 16-bit elements, k_add otherwise (H: the element type). */
template <typename H>
static void add_launch(cudaStream_t s, int sm, const float *const *x, int k, float *y, int64_t n,
                       bool v8) {
    if (v8) {
        cu_ptrs8<H> ps;
        for (int j = 0; j < VD_MAX_INPUTS; j++) ps.p[j] = j < k ? AS<H>(x[j]) : NULL;
        k_add8<H><<<grid_for(n / 8, sm), CU_THREADS, 0, s>>>(ps, k, AS<H>(y), n);
    } else {
        cu_ptrs<H> ps;
        for (int j = 0; j < VD_MAX_INPUTS; j++) ps.p[j] = j < k ? AS<H>(x[j]) : NULL;
        k_add<H><<<grid_for(n, sm), CU_THREADS, 0, s>>>(ps, k, AS<H>(y), n);
    }
}

int cuk_add(cudaStream_t s, int sm, const float *const *x, int k, float *y, int64_t n, vd_dtype dt,
            vd_err *e) {
    if (n <= 0) return VD_OK;
    if (k < 1 || k > VD_MAX_INPUTS) return vd_errf(e, VD_EINTERNAL, "cuk_add: %d inputs", k);
    if (dt != VD_DT_F32) {
        bool v8 = vec8_ok(n, y);
        for (int j = 0; v8 && j < k; j++) v8 = al16(x[j]);
        HALF_DISPATCH(dt, H, add_launch<H>(s, sm, x, k, y, n, v8));
    } else {
        bool v4 = vec4_ok(n, y);
        for (int j = 0; v4 && j < k; j++) v4 = al16(x[j]);
        if (v4) {
            cu_fptrs4 ps;
            for (int j = 0; j < VD_MAX_INPUTS; j++) ps.p[j] = j < k ? x[j] : NULL;
            k_add4<<<grid_for(n / 4, sm), CU_THREADS, 0, s>>>(ps, k, y, n);
        } else {
            cu_ptrs<float> ps;
            for (int j = 0; j < VD_MAX_INPUTS; j++) ps.p[j] = j < k ? x[j] : NULL;
            k_add<float><<<grid_for(n, sm), CU_THREADS, 0, s>>>(ps, k, y, n);
        }
    }
    KERNEL_CHECK(e);
    return VD_OK;
}

/* Forward: y[img, off + c, p] = x[img, c, p]. Backward: dx[img, c, p] (+)=
 * dy[img, off + c, p] (x = dy, y = dx). Index runs over the slice. */
template <typename T, typename I>
__global__ void k_concat(const T *x, T *y, I total, I ck, I ctot, I off, I hw,
                         bool backward, float beta) {
    GRID_STRIDE_T(I, i, total) {
        I big;
        if (NHWC<T>::on) {   /* i = pixel * ck + c */
            I pix = i / ck, c = i - pix * ck;
            big = pix * ctot + off + c;
        } else {
            I t = i / hw, p = i - t * hw;
            I img = t / ck, c = t - img * ck;
            big = (img * ctot + off + c) * hw + p;
        }
        if (backward) put(&y[i], beta, ld(x[big]));
        else y[big] = x[i];
    }
}

int cuk_concat(cudaStream_t s, int sm, const float *x, float *y, int64_t n, int64_t ck,
               int64_t ctot, int64_t off, int64_t hw, bool backward, float beta, vd_dtype dt,
               vd_err *e) {
    int64_t total = n * ck * hw;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    if (FITS32(n * ctot * hw))
        DT_DISPATCH(dt, T, k_concat<T, int><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(x), AS<T>(y), (int)total, (int)ck, (int)ctot, (int)off,
                               (int)hw, backward, beta));
    else
        DT_DISPATCH(dt, T, k_concat<T, int64_t><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(x), AS<T>(y), total, ck, ctot, off, hw, backward, beta));
    KERNEL_CHECK(e);
    return VD_OK;
}

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

/* ---- LRN (torch.nn.LocalResponseNorm) ------------------------------------- *
 * s_c = k + alpha * (sum_{j=c-size/2}^{c+(size-1)/2} x_j^2) / size,
 * y_c = x_c / s_c^beta. */
template <typename T, typename I>
__device__ __forceinline__ float lrn_scale(const T *col, I hw, int ch, int c, int size,
                                           float alpha, float k) {
    int lo = c - size / 2, hi = c + (size - 1) / 2;
    if (lo < 0) lo = 0;
    if (hi > ch - 1) hi = ch - 1;
    float acc = 0.0f;
    const I cs = NHWC<T>::on ? (I)1 : hw;   /* channel stride */
    for (int j = lo; j <= hi; j++) {
        float v = ld(col[j * cs]);
        acc += v * v;
    }
    return k + alpha * (acc / (float)size);
}

template <typename T, typename I>
__global__ void k_lrn_fwd(const T *x, T *y, I total, int ch, I hw, int size, float alpha,
                          float beta, float k) {
    GRID_STRIDE_T(I, i, total) {
        const T *col;
        int c;
        if (NHWC<T>::on) {   /* i = pixel*ch + c */
            I pix = i / ch;
            c = (int)(i - pix * ch);
            col = x + pix * ch;
        } else {
            I t = i / hw, p = i - t * hw;
            I img = t / ch;
            c = (int)(t - img * ch);
            col = x + img * ch * hw + p;
        }
        float s = lrn_scale(col, hw, ch, c, size, alpha, k);
        st(&y[i], ld(x[i]) / powf(s, beta));
    }
}

int cuk_lrn_fwd(cudaStream_t s, int sm, const float *x, float *y, int n, int ch, int64_t hw,
                int size, float alpha, float beta, float k, vd_dtype dt, vd_err *e) {
    int64_t total = (int64_t)n * ch * hw;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    if (FITS32(total))
        DT_DISPATCH(dt, T, k_lrn_fwd<T, int><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(x), AS<T>(y), (int)total, ch, (int)hw, size, alpha, beta, k));
    else
        DT_DISPATCH(dt, T, k_lrn_fwd<T, int64_t><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(x), AS<T>(y), total, ch, hw, size, alpha, beta, k));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* dx_i = dy_i / s_i^beta - (2 alpha beta / size) x_i sum_{c: i in win(c)}
 *        dy_c x_c / (s_c^beta s_c),  win(c) = [c - size/2, c + (size-1)/2]. */
template <typename T, typename I>
__global__ void k_lrn_bwd(const T *x, const T *dy, T *dx, float dx_beta, I total,
                          int ch, I hw, int size, float alpha, float beta, float k) {
    GRID_STRIDE_T(I, i, total) {
        I base, cs;
        int ci;
        if (NHWC<T>::on) {
            I pix = i / ch;
            ci = (int)(i - pix * ch);
            base = pix * ch;
            cs = 1;
        } else {
            I t = i / hw, p = i - t * hw;
            I img = t / ch;
            ci = (int)(t - img * ch);
            base = img * ch * hw + p;
            cs = hw;
        }
        const T *col = x + base;
        const T *dcol = dy + base;
        float si = lrn_scale(col, hw, ch, ci, size, alpha, k);
        int c0 = ci - (size - 1) / 2, c1 = ci + size / 2;
        if (c0 < 0) c0 = 0;
        if (c1 > ch - 1) c1 = ch - 1;
        float acc = 0.0f;
        for (int c = c0; c <= c1; c++) {
            float sc = c == ci ? si : lrn_scale(col, hw, ch, c, size, alpha, k);
            acc += ld(dcol[c * cs]) * ld(col[c * cs]) / (powf(sc, beta) * sc);
        }
        float g = ld(dcol[ci * cs]) / powf(si, beta) -
                  2.0f * alpha * beta / (float)size * ld(col[ci * cs]) * acc;
        put(&dx[i], dx_beta, g);
    }
}

int cuk_lrn_bwd(cudaStream_t s, int sm, const float *x, const float *dy, float *dx, float dx_beta,
                int n, int ch, int64_t hw, int size, float alpha, float beta, float k, vd_dtype dt,
                vd_err *e) {
    int64_t total = (int64_t)n * ch * hw;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    if (FITS32(total))
        DT_DISPATCH(dt, T, k_lrn_bwd<T, int><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(x), AS<T>(dy), AS<T>(dx), dx_beta, (int)total, ch, (int)hw,
                               size, alpha, beta, k));
    else
        DT_DISPATCH(dt, T, k_lrn_bwd<T, int64_t><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(x), AS<T>(dy), AS<T>(dx), dx_beta, total, ch, hw, size, alpha,
                               beta, k));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- softmax cross-entropy ------------------------------------------------- */
/* One block per sample: y = exp(x - max) / sum(exp(x - max)). */
template <typename T>
__global__ void k_softmax(const T *x, T *y, int classes) {
    __shared__ float sh[CU_THREADS];
    const T *xr = x + (int64_t)blockIdx.x * classes;
    T *yr = y + (int64_t)blockIdx.x * classes;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < classes; j += blockDim.x) m = fmaxf(m, ld(xr[j]));
    m = block_max(m, sh);
    float acc = 0.0f;
    for (int j = threadIdx.x; j < classes; j += blockDim.x) acc += expf(ld(xr[j]) - m);
    float sum = block_sum(acc, sh);
    for (int j = threadIdx.x; j < classes; j += blockDim.x) st(&yr[j], expf(ld(xr[j]) - m) / sum);
}

/* One block of 1024 threads: thread t computes the losses of samples t,
 * t+1024, ... from the logits (log-sum-exp, as PyTorch's log_softmax), then
 * a fixed-order tree sum; loss[0] = mean. */
enum { XENT_LOSS_THREADS = 1024 };
template <typename T>
__global__ void k_xent_loss(const T *x, const int32_t *labels, float *loss, int n,
                            int classes) {
    __shared__ float sh[XENT_LOSS_THREADS];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const T *xr = x + (int64_t)i * classes;
        int lab = labels[i];
        if (lab < 0 || lab >= classes) { acc += NAN; continue; }
        float m = -INFINITY;
        for (int j = 0; j < classes; j++) m = fmaxf(m, ld(xr[j]));
        float s = 0.0f;
        for (int j = 0; j < classes; j++) s += expf(ld(xr[j]) - m);
        acc += -((ld(xr[lab]) - m) - logf(s));
    }
    float total = block_sum(acc, sh);
    if (threadIdx.x == 0) loss[0] = total / (float)n;
}

int cuk_xent_fwd(cudaStream_t s, const float *x, const int32_t *labels, float *y, float *loss,
                 int n, int classes, vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    DT_DISPATCH(dt, T, k_softmax<T><<<(unsigned)n, CU_THREADS, 0, s>>>(AS<T>(x), AS<T>(y), classes));
    KERNEL_CHECK(e);
    if (loss) {
        DT_DISPATCH(dt, T, k_xent_loss<T><<<1, XENT_LOSS_THREADS, 0, s>>>(AS<T>(x), labels, loss, n,
                                                                         classes));
        KERNEL_CHECK(e);
    }
    return VD_OK;
}

/* dx = (softmax - onehot(label)) / n; dy is not read (the loss is last).
 * scale (math fp16, device memory: the loss scale, vd_loss_scale.scale):
 * dx = that times scale, one more rounding in float before the store;
 * NULL: unscaled. */
template <typename T, typename I>
__global__ void k_xent_bwd(const T *y, const int32_t *labels, T *dx, float beta, I total,
                           int classes, float fn, const float *scale) {
    const float sc = scale ? *scale : 1.0f;
    GRID_STRIDE_T(I, i, total) {
        I row = i / classes;
        int j = (int)(i - row * classes);
        float t = labels[row] == j ? 1.0f : 0.0f;
        float v = __fdiv_rn(__fsub_rn(ld(y[i]), t), fn);
        put(&dx[i], beta, scale ? __fmul_rn(v, sc) : v);
    }
}

int cuk_xent_bwd(cudaStream_t s, int sm, const float *y, const int32_t *labels, float *dx,
                 float beta, int n, int classes, const float *scale, vd_dtype dt, vd_err *e) {
    int64_t total = (int64_t)n * classes;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    if (FITS32(total))
        DT_DISPATCH(dt, T, k_xent_bwd<T, int><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(y), labels, AS<T>(dx), beta, (int)total, classes, (float)n,
                               scale));
    else
        DT_DISPATCH(dt, T, k_xent_bwd<T, int64_t><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(y), labels, AS<T>(dx), beta, total, classes, (float)n, scale));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- SGD (torch.optim.SGD, dampening 0, no Nesterov) ------------------------
 * g = grad + wd * p (wd != 0); buf = fresh ? g : momentum * buf + g with
 * fresh = first step or momentum 0 (then the old buffer, maybe poison, is
 * never read); p = p - lr * buf. Explicit _rn intrinsics: no fused
 * multiply-add, so each step rounds like the CPU reference. m == NULL: no
 * buffer kept, p -= lr * g. inv: the gradient is first multiplied by it
 * (the loss scale's reciprocal, math fp16; 1 is exact and changes nothing). */
__device__ __forceinline__ void sgd_elem(float *p, const float *grad, float *m, int64_t i,
                                         float lr, float momentum, float wd, bool fresh,
                                         float inv) {
    float pv = p[i];
    float gv = inv != 1.0f ? __fmul_rn(grad[i], inv) : grad[i];
    float g = wd != 0.0f ? __fadd_rn(gv, __fmul_rn(wd, pv)) : gv;
    float step = g;
    if (m) {
        float b = fresh ? g : __fadd_rn(__fmul_rn(momentum, m[i]), g);
        m[i] = b;
        step = b;
    }
    p[i] = __fsub_rn(pv, __fmul_rn(lr, step));
}

__global__ void k_sgd(float *p, const float *grad, float *m, int64_t n, float lr, float momentum,
                      float wd, bool fresh) {
    GRID_STRIDE(i, n) sgd_elem(p, grad, m, i, lr, momentum, wd, fresh, 1.0f);
}

/* GradScaler's step: nothing when the state says found_inf; otherwise the
 * step on grad / scale (the reciprocal in double, rounded to float, as
 * torch's unscale_), the momentum fresh until a step has run. */
__global__ void k_sgd_scaled(float *p, const float *grad, float *m, int64_t n, float lr,
                             float momentum, float wd, const vd_loss_scale *st) {
    if (st->found_inf) return;
    const float inv = (float)(1.0 / (double)st->scale);
    const bool fresh = !st->stepped || momentum == 0.0f;
    GRID_STRIDE(i, n) sgd_elem(p, grad, m, i, lr, momentum, wd, fresh, inv);
}

int cuk_sgd(cudaStream_t s, int sm, float *p, const float *g, float *m, int64_t n, float lr,
            float momentum, float wd, bool first, vd_err *e) {
    if (n <= 0) return VD_OK;
    k_sgd<<<grid_for(n, sm), CU_THREADS, 0, s>>>(p, g, m, n, lr, momentum, wd,
                                                  first || momentum == 0.0f);
    KERNEL_CHECK(e);
    return VD_OK;
}

int cuk_sgd_scaled(cudaStream_t s, int sm, float *p, const float *g, float *m, int64_t n,
                   float lr, float momentum, float wd, const vd_loss_scale *st, vd_err *e) {
    if (n <= 0) return VD_OK;
    k_sgd_scaled<<<grid_for(n, sm), CU_THREADS, 0, s>>>(p, g, m, n, lr, momentum, wd, st);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- dynamic loss scaling (math fp16; backend.h's vd_loss_scale) ----------
 * grad_check: a thread that saw an inf or NaN raises found_inf with a
 * compare-and-swap; the one swap that finds it 0 is the step's first, and
 * only it may write first_bad, which it does when no earlier step of the
 * run of skipped steps has (calls of a step run in stream order, so the
 * first layer checked that holds one wins). A block skips its work once the
 * flag is up (volatile read: set by this or an earlier kernel). */
__global__ void k_grad_check(const float *g, int64_t n, int layer, vd_loss_scale *st) {
    if (*(volatile int32_t *)&st->found_inf) return;
    bool bad = false;
    GRID_STRIDE(i, n) bad |= !isfinite(g[i]);
    if (bad && atomicCAS((int *)&st->found_inf, 0, 1) == 0 && st->first_bad < 0)
        st->first_bad = layer;
}

/* GradScaler's update (torch's _amp_update_scale_: backoff 0.5, growth 2
 * every VD_LOSS_SCALE_INTERVAL clean steps, kept when growing would make the
 * scale inf) plus vdnn's counters; clears found_inf. One thread. */
__global__ void k_scale_update(vd_loss_scale *st) {
    if (st->found_inf) {
        st->scale = __fmul_rn(st->scale, 0.5f);
        st->growth = 0;
        st->skipped++;
        st->streak++;
    } else {
        st->streak = 0;
        st->stepped = 1;
        st->first_bad = -1;
        if (++st->growth >= VD_LOSS_SCALE_INTERVAL) {
            float grown = __fmul_rn(st->scale, 2.0f);
            if (isfinite(grown)) st->scale = grown;
            st->growth = 0;
        }
    }
    st->found_inf = 0;
}

int cuk_grad_check(cudaStream_t s, int sm, const float *g, int64_t n, int layer,
                   vd_loss_scale *st, vd_err *e) {
    if (n <= 0) return VD_OK;
    k_grad_check<<<grid_for(n, sm), CU_THREADS, 0, s>>>(g, n, layer, st);
    KERNEL_CHECK(e);
    return VD_OK;
}

int cuk_scale_update(cudaStream_t s, vd_loss_scale *st, vd_err *e) {
    k_scale_update<<<1, 1, 0, s>>>(st);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- 16-bit conversions (math bf16 / fp16: the weights' 16-bit copy, conv dW
 * back) ------------------------------------------------------------------------ */
template <typename H>
__global__ void k_f32_to_16(const float *src, H *dst, int64_t n) {
    GRID_STRIDE(i, n) st(&dst[i], src[i]);
}

template <typename H>
__global__ void k_16_to_f32(const H *src, float *dst, int64_t n) {
    GRID_STRIDE(i, n) dst[i] = ld(src[i]);
}

int cuk_f32_to_16(cudaStream_t s, int sm, const float *src, void *dst, int64_t n, vd_dtype dt,
                  vd_err *e) {
    if (n <= 0) return VD_OK;
    if (dt == VD_DT_F32) return vd_errf(e, VD_EINTERNAL, "cuk_f32_to_16: to fp32");
    HALF_DISPATCH(dt, H, k_f32_to_16<H><<<grid_for(n, sm), CU_THREADS, 0, s>>>(src, (H *)dst, n));
    KERNEL_CHECK(e);
    return VD_OK;
}

int cuk_16_to_f32(cudaStream_t s, int sm, const void *src, float *dst, int64_t n, vd_dtype dt,
                  vd_err *e) {
    if (n <= 0) return VD_OK;
    if (dt == VD_DT_F32) return vd_errf(e, VD_EINTERNAL, "cuk_16_to_f32: from fp32");
    HALF_DISPATCH(dt, H, k_16_to_f32<H><<<grid_for(n, sm), CU_THREADS, 0, s>>>((const H *)src, dst, n));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- layout conversions (math bf16 / fp16) ----------------------------------
 * n images of c x hw: NCHW <-> NHWC, element types converted on the way
 * (float -> 16-bit rounds to nearest even, 16-bit -> float is exact); beta: 0
 * overwrites, else dst += (in float, one rounding). Conv weights [K, C, R, S]
 * are n = K images of C x RS (NHWC = KRSC). Indexed by the destination. */
template <typename TI, typename TO>
__global__ void k_relayout(const TI *src, TO *dst, int64_t total, int64_t c, int64_t hw,
                           bool to_nhwc, float beta) {
    GRID_STRIDE(i, total) {
        int64_t j;
        if (to_nhwc) {   /* i = (img*hw + p)*c + ch */
            int64_t pix = i / c, ch = i - pix * c, img = pix / hw;
            j = (img * c + ch) * hw + (pix - img * hw);
        } else {         /* i = (img*c + ch)*hw + p */
            int64_t t = i / hw, p = i - t * hw, img = t / c;
            j = (img * hw + p) * c + (t - img * c);
        }
        put(&dst[i], beta, ld(src[j]));
    }
}

template <typename TI>
static void relayout_to(cudaStream_t s, unsigned gr, const TI *src, void *dst, vd_dtype dst_dt,
                        int64_t total, int64_t c, int64_t hw, bool to_nhwc, float beta) {
    DT_DISPATCH(dst_dt, TO, k_relayout<TI, TO><<<gr, CU_THREADS, 0, s>>>(src, (TO *)dst, total, c,
                                                                        hw, to_nhwc, beta));
}

int cuk_relayout(cudaStream_t s, int sm, const void *src, vd_dtype src_dt, void *dst,
                 vd_dtype dst_dt, int64_t n, int64_t c, int64_t hw, bool to_nhwc, float beta,
                 vd_err *e) {
    int64_t total = n * c * hw;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    DT_DISPATCH(src_dt, TI, relayout_to<TI>(s, gr, (const TI *)src, dst, dst_dt, total, c, hw,
                                            to_nhwc, beta));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- batch norm, channels-last 16-bit ----------------------------------------
 * cuDNN's CUDNN_BATCHNORM_SPATIAL on NHWC bf16 is its slow general path; these
 * kernels follow the CPU reference (cpu_ops.c) instead. x, y, dy, dx: bf16 or
 * fp16 (H)
 * [pix = n*h*w][c]; statistics, parameters and their gradients float.
 * Reductions: block (cb, k) takes channels [32 cb, 32 cb + 32) (one per lane)
 * over pixel chunk k of split; each of the block's 8 rows of lanes walks every
 * 8th pixel of the chunk, accumulating in float; rows are added in order, the
 * split partials then in double, in order: bit-identical run to run.
 * Forward sums are shifted by the channel's first value (x[0][c]), so the
 * variance does not cancel when |mean| >> std. */
enum { BN_LANES = 32 };

/* Eight-channel reductions (ch % 8 == 0): a row of tpr threads covers
 * 8 * tpr channels, CU_THREADS / tpr rows per block. */
static int bn_tpr(int64_t ch) { return ch % 8 == 0 && ch / 8 < BN_LANES ? (int)(ch / 8) : BN_LANES; }
static int64_t bn_gx(int64_t ch) {
    if (ch % 8 != 0) return (ch + BN_LANES - 1) / BN_LANES;
    int64_t w = 8 * (int64_t)bn_tpr(ch);
    return (ch + w - 1) / w;
}

int cu_bn_split(int64_t pix, int64_t ch, int sm_count) {
    int64_t cb = bn_gx(ch);
    int64_t want = ((int64_t)(sm_count > 0 ? sm_count : 132) * 4 + cb - 1) / cb;
    int64_t most = pix / (4 * (CU_THREADS / bn_tpr(ch)));   /* >= 4 pixels per thread */
    int64_t sp = want < most ? want : most;
    if (sp > 4096) sp = 4096;
    return sp < 1 ? 1 : (int)sp;
}

uint64_t cu_bn_ws_bytes(int64_t pix, int64_t ch, int sm_count) {
    return (uint64_t)cu_bn_split(pix, ch, sm_count) * (uint64_t)ch * 2u * sizeof(float);
}

/* Rows of the block in order: a[lane] += a[r*32 + lane] for r = 1..7. */
__device__ __forceinline__ void bn_rows_sum(float *sh, int lane, int rows) {
    float t = sh[lane];
    for (int r = 1; r < rows; r++) t += sh[r * BN_LANES + lane];
    sh[lane] = t;
}

/* part[0][c*split + k] = sum (x - x0[c]), part[1][...] = sum (x - x0[c])^2 over
 * chunk k (x0[c] = x[c], the first pixel's value). */
template <typename H>
__global__ void k_bn_stats_part(const H *x, int64_t pix, int64_t ch, int split,
                                float *part) {
    __shared__ float s1[CU_THREADS], s2[CU_THREADS];
    const int lane = threadIdx.x % BN_LANES, row = threadIdx.x / BN_LANES;
    const int rows = blockDim.x / BN_LANES;
    int64_t c = (int64_t)blockIdx.x * BN_LANES + lane, k = blockIdx.y;
    int64_t chunk = (pix + split - 1) / split;
    int64_t j0 = k * chunk, j1 = j0 + chunk < pix ? j0 + chunk : pix;
    float a = 0.0f, b = 0.0f;
    if (c < ch) {
        float x0 = ld(x[c]);
        for (int64_t j = j0 + row; j < j1; j += rows) {
            float d = ld(x[j * ch + c]) - x0;
            a += d;
            b += d * d;
        }
    }
    s1[threadIdx.x] = a;
    s2[threadIdx.x] = b;
    __syncthreads();
    if (row == 0 && c < ch) {
        bn_rows_sum(s1, lane, rows);
        bn_rows_sum(s2, lane, rows);
        part[c * split + k] = s1[lane];
        part[ch * split + c * split + k] = s2[lane];
    }
}

/* y = (x - mean) * invstd * gamma + beta, as the CPU reference's float line. */
template <typename H>
__global__ void k_bn_norm(const H *x, H *y, const float *aux, const float *g,
                          const float *bta, int64_t total, int ch) {
    GRID_STRIDE(i, total) {
        int c = (int)(i % ch);
        st(&y[i], (ld(x[i]) - aux[c]) * aux[ch + c] * g[c] + bta[c]);
    }
}

/* part[0][c*split + k] = sum dy, part[1][...] = sum dy * (x - mean) over chunk k. */
template <typename H>
__global__ void k_bn_bwd_part(const H *x, const H *dy, const float *aux, int64_t pix,
                              int64_t ch, int split, float *part) {
    __shared__ float s1[CU_THREADS], s2[CU_THREADS];
    const int lane = threadIdx.x % BN_LANES, row = threadIdx.x / BN_LANES;
    const int rows = blockDim.x / BN_LANES;
    int64_t c = (int64_t)blockIdx.x * BN_LANES + lane, k = blockIdx.y;
    int64_t chunk = (pix + split - 1) / split;
    int64_t j0 = k * chunk, j1 = j0 + chunk < pix ? j0 + chunk : pix;
    float a = 0.0f, b = 0.0f;
    if (c < ch) {
        float mu = aux[c];
        for (int64_t j = j0 + row; j < j1; j += rows) {
            float d = ld(dy[j * ch + c]);
            a += d;
            b += d * (ld(x[j * ch + c]) - mu);
        }
    }
    s1[threadIdx.x] = a;
    s2[threadIdx.x] = b;
    __syncthreads();
    if (row == 0 && c < ch) {
        bn_rows_sum(s1, lane, rows);
        bn_rows_sum(s2, lane, rows);
        part[c * split + k] = s1[lane];
        part[ch * split + c * split + k] = s2[lane];
    }
}

/* dx = gamma*invstd * (dy - sum(dy)/M - xhat*sum(dy*xhat)/M), dw/db holding
 * the sums (k_bn_bwd_final); beta: accumulate into dx. */
template <typename H>
__global__ void k_bn_dx(const H *x, const H *dy, H *dx, const float *aux,
                        const float *g, const float *dw, const float *db, float beta,
                        int64_t total, int ch, float inv_m) {
    GRID_STRIDE(i, total) {
        int c = (int)(i % ch);
        float is = aux[ch + c];
        float xh = (ld(x[i]) - aux[c]) * is;
        float v = g[c] * is * (ld(dy[i]) - db[c] * inv_m - xh * dw[c] * inv_m);
        put(&dx[i], beta, v);
    }
}


/* Per channel over pixel chunk k of split (block (bx, k)): MODE 0 (forward
 * statistics) sums x - x0[c] and its square (x0 = the first pixel's value),
 * MODE 1 (backward) sums dy and dy * (x - mean[c]), MODE 2 (bias gradient) sums
 * x alone and writes only the first half of part. Thread (lane, row) takes
 * channels 8 (bx tpr + lane) .. +7 and every rows-th pixel of the chunk in
 * 16-byte loads; rows are added in order, then k_red_final adds the split
 * partials: a fixed order, bit-identical run to run. */
template <int MODE, typename H>
__global__ void k_chan_red8(const H *x, const H *dy, const float *mean, int64_t pix,
                            int64_t ch, int split, int tpr, float *part) {
    __shared__ float sa[CU_THREADS * 8], sb[CU_THREADS * 8];
    const int lane = threadIdx.x % tpr, row = threadIdx.x / tpr, rows = blockDim.x / tpr;
    int64_t c0 = ((int64_t)blockIdx.x * tpr + lane) * 8, k = blockIdx.y;
    int64_t chunk = (pix + split - 1) / split;
    int64_t j0 = k * chunk, j1 = j0 + chunk < pix ? j0 + chunk : pix;
    float a[8], b[8], sh[8];
#pragma unroll
    for (int q = 0; q < 8; q++) { a[q] = 0.0f; b[q] = 0.0f; sh[q] = 0.0f; }
    bool on = row < rows && c0 < ch;
    if (on) {
        if (MODE == 0) {
            bf8 f = ld8(x + c0);
#pragma unroll
            for (int q = 0; q < 8; q++) sh[q] = f.v[q];
        } else if (MODE == 1) {
#pragma unroll
            for (int q = 0; q < 8; q++) sh[q] = mean[c0 + q];
        }
#pragma unroll 4
        for (int64_t j = j0 + row; j < j1; j += rows) {
            bf8 xv = ld8(x + j * ch + c0);
            if (MODE == 2) {
#pragma unroll
                for (int q = 0; q < 8; q++) a[q] += xv.v[q];
            } else if (MODE == 0) {
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    float d = xv.v[q] - sh[q];
                    a[q] += d;
                    b[q] += d * d;
                }
            } else {
                bf8 g = ld8(dy + j * ch + c0);
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    a[q] += g.v[q];
                    b[q] += g.v[q] * (xv.v[q] - sh[q]);
                }
            }
        }
    }
#pragma unroll
    for (int q = 0; q < 8; q++) {
        sa[threadIdx.x * 8 + q] = a[q];
        sb[threadIdx.x * 8 + q] = b[q];
    }
    __syncthreads();
    if (row == 0 && c0 < ch) {
        for (int r = 1; r < rows; r++)
#pragma unroll
            for (int q = 0; q < 8; q++) {
                a[q] += sa[(r * tpr + lane) * 8 + q];
                b[q] += sb[(r * tpr + lane) * 8 + q];
            }
#pragma unroll
        for (int q = 0; q < 8; q++) {
            part[(c0 + q) * split + k] = a[q];
            if (MODE != 2) part[ch * split + (c0 + q) * split + k] = b[q];
        }
    }
}

/* One warp per channel c: out_a[c] = sum over k of part[c*split + k] and
 * out_b likewise from the second half, in double: lane l takes k = l, l+32,
 * ..., then a fixed shuffle tree. */
__device__ __forceinline__ void red_final_warp(const float *part, int64_t ch, int split, int64_t c,
                                               double *ra, double *rb) {
    const int lane = threadIdx.x % 32;
    double a = 0.0, b = 0.0;
    for (int k = lane; k < split; k += 32) {
        a += (double)part[c * split + k];
        b += (double)part[ch * split + c * split + k];
    }
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, o);
        b += __shfl_down_sync(0xffffffffu, b, o);
    }
    *ra = a;
    *rb = b;
}

template <typename H>
__global__ void k_bn_stats_final_w(const H *x, const float *part, int64_t pix, int64_t ch,
                                   int split, float eps, float m, float *aux, float *rm,
                                   float *rv) {
    int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (c >= ch) return;   /* whole warps leave together (blockDim.x % 32 == 0) */
    double a, b;
    red_final_warp(part, ch, split, c, &a, &b);
    if (threadIdx.x % 32) return;
    double M = (double)pix, dm = a / M;
    double var = b / M - dm * dm;
    if (var < 0.0) var = 0.0;
    double mu = (double)ld(x[c]) + dm;
    aux[c] = (float)mu;
    aux[ch + c] = (float)(1.0 / sqrt(var + (double)eps));
    if (rm) rm[c] = (float)((1.0 - (double)m) * rm[c] + (double)m * mu);
    if (rv) rv[c] = (float)((1.0 - (double)m) * rv[c] + (double)m * (var * M / (M - 1.0)));
}

__global__ void k_bn_bwd_final_w(const float *part, const float *aux, int64_t ch, int split,
                                 float *dw, float *db) {
    int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (c >= ch) return;
    double a, b;
    red_final_warp(part, ch, split, c, &a, &b);
    if (threadIdx.x % 32) return;
    db[c] = (float)a;
    dw[c] = (float)(b * (double)aux[ch + c]);
}

__global__ void k_chan_final_w(const float *part, int64_t ch, int split, float *db) {
    int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (c >= ch) return;
    const int lane = threadIdx.x % 32;
    float a = 0.0f;
    for (int k = lane; k < split; k += 32) a += part[c * split + k];
    for (int o = 16; o > 0; o >>= 1) a += __shfl_down_sync(0xffffffffu, a, o);
    if (lane == 0) db[c] = a;
}

static unsigned warps_grid(int64_t ch) { return (unsigned)((ch * 32 + CU_THREADS - 1) / CU_THREADS); }

/* k_bn_norm / k_bn_dx with the channel parameters in registers: block
 * (bx, by) of tpr x rows threads; thread (lane, row) keeps channels
 * 8 (bx tpr + lane) .. +7 and walks pixels by*rows + row, stepping
 * gridDim.y * rows. Same arithmetic per element as k_bn_norm / k_bn_dx. */
template <typename H>
__global__ void k_bn_norm8p(const H *x, H *y, const float *aux, const float *g,
                            const float *bta, int64_t pix, int ch, int tpr) {
    const int lane = threadIdx.x % tpr, row = threadIdx.x / tpr, rows = blockDim.x / tpr;
    int c0 = ((int)blockIdx.x * tpr + lane) * 8;
    if (row >= rows || c0 >= ch) return;
    float mu[8], is[8], ga[8], be[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
        mu[k] = aux[c0 + k];
        is[k] = aux[ch + c0 + k];
        ga[k] = g[c0 + k];
        be[k] = bta[c0 + k];
    }
    for (int64_t j = (int64_t)blockIdx.y * rows + row; j < pix; j += (int64_t)gridDim.y * rows) {
        bf8 v = ld8(x + j * ch + c0);
#pragma unroll
        for (int k = 0; k < 8; k++) v.v[k] = (v.v[k] - mu[k]) * is[k] * ga[k] + be[k];
        st8(y + j * ch + c0, v);
    }
}

template <typename H>
__global__ void k_bn_dx8p(const H *x, const H *dy, H *dx, const float *aux,
                          const float *g, const float *dw, const float *db, float beta,
                          int64_t pix, int ch, int tpr, float inv_m) {
    const int lane = threadIdx.x % tpr, row = threadIdx.x / tpr, rows = blockDim.x / tpr;
    int c0 = ((int)blockIdx.x * tpr + lane) * 8;
    if (row >= rows || c0 >= ch) return;
    float mu[8], is[8], ga[8], sb[8], sw[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
        mu[k] = aux[c0 + k];
        is[k] = aux[ch + c0 + k];
        ga[k] = g[c0 + k];
        sb[k] = db[c0 + k] * inv_m;
        sw[k] = dw[c0 + k] * inv_m;
    }
    for (int64_t j = (int64_t)blockIdx.y * rows + row; j < pix; j += (int64_t)gridDim.y * rows) {
        bf8 xv = ld8(x + j * ch + c0), d = ld8(dy + j * ch + c0);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float xh = (xv.v[k] - mu[k]) * is[k];
            d.v[k] = ga[k] * is[k] * (d.v[k] - sb[k] - xh * sw[k]);
        }
        put8(dx + j * ch + c0, beta, d);
    }
}

/* Grid of k_bn_norm8p / k_bn_dx8p: about sm * 8 blocks. */
static dim3 bn_elt_grid(int64_t pix, int64_t ch, int sm) {
    int64_t gx = bn_gx(ch), rows = CU_THREADS / bn_tpr(ch);
    int64_t gy = ((int64_t)(sm > 0 ? sm : 132) * 8 + gx - 1) / gx;
    int64_t most = (pix + rows - 1) / rows;
    if (gy > most) gy = most;
    if (gy > 65535) gy = 65535;
    if (gy < 1) gy = 1;
    return dim3((unsigned)gx, (unsigned)gy);
}

/* Bias gradient of channels-last 16-bit dy (ch % 8 == 0, dy 16-byte aligned):
 * split == 1 writes db straight away. */
static int chan_sum8(cudaStream_t s, const float *dy, int64_t pix, int64_t ch, int split,
                     float *partial, float *db, vd_dtype dt, vd_err *e) {
    dim3 g8((unsigned)bn_gx(ch), (unsigned)split);
    float *out = split == 1 ? db : partial;
    HALF_DISPATCH(dt, H, k_chan_red8<2, H><<<g8, CU_THREADS, 0, s>>>(AS<H>(dy), NULL, NULL, pix, ch,
                                                                     split, bn_tpr(ch), out));
    KERNEL_CHECK(e);
    if (split > 1) {
        k_chan_final_w<<<warps_grid(ch), CU_THREADS, 0, s>>>(partial, ch, split, db);
        KERNEL_CHECK(e);
    }
    return VD_OK;
}

template <typename H>
static int bn_fwd_nhwc(cudaStream_t s, int sm, const float *x, float *y, const float *gamma,
                       const float *beta, float *aux, float *rm, float *rv, int64_t pix, int64_t ch,
                       bool training, float eps, float momentum, void *ws, uint64_t ws_bytes,
                       vd_err *e) {
    if (pix <= 0 || ch <= 0) return VD_OK;
    if (ch > 0x7fffffff)
        return vd_errf(e, VD_EINTERNAL, "bn (channels-last): %lld channels", (long long)ch);
    if (training) {
        int split = cu_bn_split(pix, ch, sm);
        if (!ws || ws_bytes < cu_bn_ws_bytes(pix, ch, sm))
            return vd_errf(e, VD_EINTERNAL,
                           "bn (channels-last): workspace %llu bytes, needs %llu",
                           (unsigned long long)ws_bytes,
                           (unsigned long long)cu_bn_ws_bytes(pix, ch, sm));
        if (ch % 8 == 0 && al16(x)) {
            int tpr = bn_tpr(ch);
            dim3 g8((unsigned)bn_gx(ch), (unsigned)split);
            k_chan_red8<0, H><<<g8, CU_THREADS, 0, s>>>(AS<H>(x), NULL, NULL, pix, ch, split, tpr,
                                                    (float *)ws);
            KERNEL_CHECK(e);
            k_bn_stats_final_w<H><<<warps_grid(ch), CU_THREADS, 0, s>>>(
                AS<H>(x), (const float *)ws, pix, ch, split, eps, momentum, aux, rm, rv);
            KERNEL_CHECK(e);
        } else {
            dim3 gr((unsigned)((ch + BN_LANES - 1) / BN_LANES), (unsigned)split);
            k_bn_stats_part<H><<<gr, CU_THREADS, 0, s>>>(AS<H>(x), pix, ch, split, (float *)ws);
            KERNEL_CHECK(e);
            k_bn_stats_final_w<H><<<warps_grid(ch), CU_THREADS, 0, s>>>(
                AS<H>(x), (const float *)ws, pix, ch, split, eps, momentum, aux, rm, rv);
            KERNEL_CHECK(e);
        }
    } else {
        int rc = cuk_bn_eval_aux(s, rm, rv, aux, (int)ch, eps, e);
        if (rc) return rc;
    }
    int64_t total = pix * ch;
    if (ch % 8 == 0 && vec8_ok(total, x, y)) {
        k_bn_norm8p<H><<<bn_elt_grid(pix, ch, sm), CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(y), aux, gamma, beta,
                                                                    pix, (int)ch, bn_tpr(ch));
        KERNEL_CHECK(e);
        return VD_OK;
    }
    k_bn_norm<H><<<grid_for(total, sm), CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(y), aux, gamma, beta, total,
                                                        (int)ch);
    KERNEL_CHECK(e);
    return VD_OK;
}

template <typename H>
static int bn_bwd_nhwc(cudaStream_t s, int sm, const float *x, const float *dy, float *dx,
                       float dx_beta, const float *gamma, const float *aux, float *dw, float *db,
                       int64_t pix, int64_t ch, void *ws, uint64_t ws_bytes, vd_err *e) {
    if (pix <= 0 || ch <= 0) return VD_OK;
    int split = cu_bn_split(pix, ch, sm);
    if (!ws || ws_bytes < cu_bn_ws_bytes(pix, ch, sm) || ch > 0x7fffffff)
        return vd_errf(e, VD_EINTERNAL, "bn backward (channels-last): workspace %llu bytes, "
                       "needs %llu", (unsigned long long)ws_bytes,
                       (unsigned long long)cu_bn_ws_bytes(pix, ch, sm));
    if (ch % 8 == 0 && al16(x) && al16(dy)) {
        dim3 g8((unsigned)bn_gx(ch), (unsigned)split);
        k_chan_red8<1, H><<<g8, CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(dy), aux, pix, ch, split, bn_tpr(ch),
                                                (float *)ws);
        KERNEL_CHECK(e);
        k_bn_bwd_final_w<<<warps_grid(ch), CU_THREADS, 0, s>>>((const float *)ws, aux, ch, split,
                                                              dw, db);
        KERNEL_CHECK(e);
    } else {
        dim3 gr((unsigned)((ch + BN_LANES - 1) / BN_LANES), (unsigned)split);
        k_bn_bwd_part<H><<<gr, CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(dy), aux, pix, ch, split, (float *)ws);
        KERNEL_CHECK(e);
        k_bn_bwd_final_w<<<warps_grid(ch), CU_THREADS, 0, s>>>((const float *)ws, aux, ch, split,
                                                              dw, db);
        KERNEL_CHECK(e);
    }
    int64_t total = pix * ch;
    if (ch % 8 == 0 && vec8_ok(total, x, dy, dx)) {
        k_bn_dx8p<H><<<bn_elt_grid(pix, ch, sm), CU_THREADS, 0, s>>>(
            AS<H>(x), AS<H>(dy), AS<H>(dx), aux, gamma, dw, db, dx_beta, pix, (int)ch, bn_tpr(ch),
            (float)(1.0 / (double)pix));
        KERNEL_CHECK(e);
        return VD_OK;
    }
    k_bn_dx<H><<<grid_for(total, sm), CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(dy), AS<H>(dx), aux, gamma, dw, db,
                                                      dx_beta, total, (int)ch,
                                                      (float)(1.0 / (double)pix));
    KERNEL_CHECK(e);
    return VD_OK;
}

int cuk_bn_fwd_nhwc(cudaStream_t s, int sm, const float *x, float *y, const float *gamma,
                    const float *beta, float *aux, float *rm, float *rv, int64_t pix, int64_t ch,
                    bool training, float eps, float momentum, void *ws, uint64_t ws_bytes,
                    vd_dtype dt, vd_err *e) {
    if (dt == VD_DT_F32) return vd_errf(e, VD_EINTERNAL, "bn (channels-last): fp32 maps");
    HALF_DISPATCH(dt, H, return bn_fwd_nhwc<H>(s, sm, x, y, gamma, beta, aux, rm, rv, pix, ch,
                                               training, eps, momentum, ws, ws_bytes, e));
    return VD_OK;   /* not reached */
}

int cuk_bn_bwd_nhwc(cudaStream_t s, int sm, const float *x, const float *dy, float *dx,
                    float dx_beta, const float *gamma, const float *aux, float *dw, float *db,
                    int64_t pix, int64_t ch, void *ws, uint64_t ws_bytes, vd_dtype dt, vd_err *e) {
    if (dt == VD_DT_F32) return vd_errf(e, VD_EINTERNAL, "bn backward (channels-last): fp32 maps");
    HALF_DISPATCH(dt, H, return bn_bwd_nhwc<H>(s, sm, x, dy, dx, dx_beta, gamma, aux, dw, db, pix,
                                               ch, ws, ws_bytes, e));
    return VD_OK;   /* not reached */
}
