/* cuda_k_convert.cu — element-type and layout conversions: fp32 <-> 16-bit
 * copies (math bf16 / fp16) and NCHW <-> NHWC relayout (tf32, bf16, fp16). */
#include "backend/cuda/cuda_kernels.h"

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

/* ---- layout conversions (channels-last maps: tf32, bf16, fp16) -------------
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
