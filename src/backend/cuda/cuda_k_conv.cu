/* cuda_k_conv.cu — direct convolution for first layers (few inputs per
 * output), beside cuDNN. */
#include "backend/cuda/cuda_kernels.h"

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
