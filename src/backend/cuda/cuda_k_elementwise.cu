/* cuda_k_elementwise.cu — elementwise kernels and their launchers: relu,
 * gelu, dropout, copy with beta, sum of inputs, bias add, channel concat,
 * the 16-byte vector forms of the hot ones, and the profiler's fills. */
#include "backend/cuda/cuda_kernels.h"

/* ---- 16-byte vector forms: eight bf16 / fp16 or four floats per thread ---- */
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

template <typename H>
__global__ void k_add8(cu_ptrs<H> x, int kin, H *y, int64_t n, bool relu) {
    GRID_STRIDE8(i, n) {
        bf8 acc = ld8(x.p[0] + i);
        for (int j = 1; j < kin; j++) {
            bf8 b = ld8(x.p[j] + i);
#pragma unroll
            for (int k = 0; k < 8; k++) acc.v[k] = __fadd_rn(acc.v[k], b.v[k]);
        }
        if (relu)
#pragma unroll
            for (int k = 0; k < 8; k++) acc.v[k] = relu1(acc.v[k]);
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

__global__ void k_add4(cu_fptrs4 x, int kin, float *y, int64_t n, bool relu) {
    GRID_STRIDE4(i, n) {
        float4 acc = *(const float4 *)(x.p[0] + i);
        for (int j = 1; j < kin; j++) {
            float4 b = *(const float4 *)(x.p[j] + i);
            acc.x = __fadd_rn(acc.x, b.x); acc.y = __fadd_rn(acc.y, b.y);
            acc.z = __fadd_rn(acc.z, b.z); acc.w = __fadd_rn(acc.w, b.w);
        }
        if (relu) { acc.x = relu1(acc.x); acc.y = relu1(acc.y); acc.z = relu1(acc.z); acc.w = relu1(acc.w); }
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

/* One thread that returns once the device's global timer has advanced by ns
 * (it occupies one SM's slot meanwhile, no memory traffic). */
__global__ void k_spin(uint64_t ns) {
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

int cuk_spin(cudaStream_t s, uint64_t ns, vd_err *e) {
    k_spin<<<1, 1, 0, s>>>(ns);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* ---- bias ------------------------------------------------------------------ */
template <bool CL, typename T, typename I>
__global__ void k_bias_add(T *y, const float *b, I total, I ch, I hw) {
    GRID_STRIDE_T(I, i, total)
        st(&y[i], __fadd_rn(ld(y[i]), b[CL ? i % ch : (i / hw) % ch]));
}

int cuk_bias_add(cudaStream_t s, int sm, float *y, const float *b, int64_t n, int64_t ch,
                 int64_t hw, vd_dtype dt, bool cl, vd_err *e) {
    int64_t total = n * ch * hw;
    if (total <= 0) return VD_OK;
    /* eight channels at a time: channels-last, or H*W = 1 (the same index) */
    if ((cl || hw == 1) && ch % 8 == 0 && vec8_ok(total, y)) {
        DT_DISPATCH(dt, H, k_bias_add8<H><<<grid_for(total / 8, sm), CU_THREADS, 0, s>>>(
                               AS<H>(y), b, total, ch));
        KERNEL_CHECK(e);
        return VD_OK;
    }
    unsigned gr = grid_for(total, sm);
    if (FITS32(total))
        CL_DISPATCH(cl, CL, DT_DISPATCH(dt, T, k_bias_add<CL, T, int><<<gr, CU_THREADS, 0, s>>>(
                                                   AS<T>(y), b, (int)total, (int)ch, (int)hw)));
    else
        CL_DISPATCH(cl, CL, DT_DISPATCH(dt, T, k_bias_add<CL, T, int64_t><<<gr, CU_THREADS, 0, s>>>(
                                                   AS<T>(y), b, total, ch, hw)));
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
 * and backward (x = dy, y = dx) are the same map. base: the batch's NCHW
 * index of element 0 (a chunk's first sample times C*H*W). The mask's
 * iteration is iter + S->iter (the step scalars, device memory). */
template <bool CL, typename T>
__global__ void k_dropout(const T *x, T *y, float beta, int64_t n, float p, float scale,
                          uint64_t seed, uint64_t layer, uint64_t iter0,
                          const vd_step_scalars *S, int64_t ch, int64_t hw, int64_t base) {
    const uint64_t iter = iter0 + (uint64_t)S->iter;
    GRID_STRIDE(i, n) {
        int64_t m = i;   /* the mask is drawn by NCHW index in every layout */
        if (CL && hw > 1) {
            int64_t pix = i / ch, c = i - pix * ch, img = pix / hw;
            m = (img * ch + c) * hw + (pix - img * hw);
        }
        bool keep = vd_hash_uniform(seed, layer, iter, (uint64_t)(base + m)) >= p;
        float v = keep ? __fmul_rn(ld(x[i]), scale) : 0.0f;
        put(&y[i], beta, v);
    }
}

int cuk_dropout(cudaStream_t s, int sm, const float *x, float *y, float beta, int64_t n, float p,
                float scale, uint64_t seed, uint64_t layer, uint64_t iter,
                const vd_step_scalars *S, int64_t ch, int64_t hw, int64_t base, vd_dtype dt,
                bool cl, vd_err *e) {
    if (n <= 0) return VD_OK;
    CL_DISPATCH(cl, CL, DT_DISPATCH(dt, T, k_dropout<CL, T><<<grid_for(n, sm), CU_THREADS, 0, s>>>(
                                               AS<T>(x), AS<T>(y), beta, n, p, scale, seed,
                                               layer, iter, S, ch, hw, base)));
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

/* dst[i] (+)= sum over j < n of src[j * m + i], j in order (deterministic):
 * the per-sample partial weight gradients of the 1x1 GEMM backward-filter;
 * beta != 0 adds the sum to dst (a chunk's dw_beta) */
__global__ void k_sum_batch(const float *__restrict__ src, int64_t n, int64_t m, float beta,
                            float *__restrict__ dst) {
    GRID_STRIDE(i, m) {
        float acc = 0.0f;
        for (int64_t j = 0; j < n; j++) acc = __fadd_rn(acc, src[j * m + i]);
        put(&dst[i], beta, acc);
    }
}

int cuk_sum_batch(cudaStream_t s, int sm, const float *src, int64_t n, int64_t m, float beta,
                  float *dst, vd_err *e) {
    if (m <= 0) return VD_OK;
    k_sum_batch<<<grid_for(m, sm), CU_THREADS, 0, s>>>(src, n, m, beta, dst);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* y = ((x0 + x1) + x2) + ... (in float; 16-bit: one rounding at the end);
 * y may be any x[k] (a forward-only plan's add in place: backend.h,
 * vd_op_io.y): in k_add, k_add4 and k_add8 each thread loads elements
 * i.. of every input (plain loads, no __restrict__ or read-only-cache
 * __ldg, so the compiler keeps them before the aliasing store) and then
 * stores y's same elements; no thread touches another's elements.
 * relu: max(y, 0) as cuk_relu_fwd, before that rounding (rounding to nearest
 * keeps the sign and maps 0 to 0: what the two ops store) */
template <typename T>
__global__ void k_add(cu_ptrs<T> x, int k, T *y, int64_t n, bool relu) {
    GRID_STRIDE(i, n) {
        float acc = ld(x.p[0][i]);
        for (int j = 1; j < k; j++) acc = __fadd_rn(acc, ld(x.p[j][i]));
        st(&y[i], relu ? relu1(acc) : acc);
    }
}

/* k_add8 on 16-bit elements, k_add otherwise (H: the element type). */
template <typename H>
static void add_launch(cudaStream_t s, int sm, const float *const *x, int k, float *y, int64_t n,
                       bool v8, bool relu) {
    cu_ptrs<H> ps;
    for (int j = 0; j < VD_MAX_INPUTS; j++) ps.p[j] = j < k ? AS<H>(x[j]) : NULL;
    if (v8) k_add8<H><<<grid_for(n / 8, sm), CU_THREADS, 0, s>>>(ps, k, AS<H>(y), n, relu);
    else k_add<H><<<grid_for(n, sm), CU_THREADS, 0, s>>>(ps, k, AS<H>(y), n, relu);
}

int cuk_add(cudaStream_t s, int sm, const float *const *x, int k, float *y, int64_t n, bool relu,
            vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    if (k < 1 || k > VD_MAX_INPUTS) return vd_errf(e, VD_EINTERNAL, "cuk_add: %d inputs", k);
    if (dt != VD_DT_F32) {
        bool v8 = vec8_ok(n, y);
        for (int j = 0; v8 && j < k; j++) v8 = al16(x[j]);
        HALF_DISPATCH(dt, H, add_launch<H>(s, sm, x, k, y, n, v8, relu));
    } else {
        bool v4 = vec4_ok(n, y);
        for (int j = 0; v4 && j < k; j++) v4 = al16(x[j]);
        if (v4) {
            cu_fptrs4 ps;
            for (int j = 0; j < VD_MAX_INPUTS; j++) ps.p[j] = j < k ? x[j] : NULL;
            k_add4<<<grid_for(n / 4, sm), CU_THREADS, 0, s>>>(ps, k, y, n, relu);
        } else {
            cu_ptrs<float> ps;
            for (int j = 0; j < VD_MAX_INPUTS; j++) ps.p[j] = j < k ? x[j] : NULL;
            k_add<float><<<grid_for(n, sm), CU_THREADS, 0, s>>>(ps, k, y, n, relu);
        }
    }
    KERNEL_CHECK(e);
    return VD_OK;
}

/* Forward: y[img, off + c, p] = x[img, c, p]. Backward: dx[img, c, p] (+)=
 * dy[img, off + c, p] (x = dy, y = dx). Index runs over the slice. */
template <bool CL, typename T, typename I>
__global__ void k_concat(const T *x, T *y, I total, I ck, I ctot, I off, I hw,
                         bool backward, float beta) {
    GRID_STRIDE_T(I, i, total) {
        I big;
        if (CL) {   /* i = pixel * ck + c */
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
               bool cl, vd_err *e) {
    int64_t total = n * ck * hw;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    if (FITS32(n * ctot * hw))
        CL_DISPATCH(cl, CL, DT_DISPATCH(dt, T, k_concat<CL, T, int><<<gr, CU_THREADS, 0, s>>>(
                                                   AS<T>(x), AS<T>(y), (int)total, (int)ck,
                                                   (int)ctot, (int)off, (int)hw, backward, beta)));
    else
        CL_DISPATCH(cl, CL, DT_DISPATCH(dt, T, k_concat<CL, T, int64_t><<<gr, CU_THREADS, 0, s>>>(
                                                   AS<T>(x), AS<T>(y), total, ck, ctot, off, hw,
                                                   backward, beta)));
    KERNEL_CHECK(e);
    return VD_OK;
}
