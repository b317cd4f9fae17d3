/* cuda_k_norm.cu — per-channel reductions and normalisation: bias
 * gradients (channel and column sums), batch norm (eval statistics; the
 * channels-last forward and backward) and LRN. */
#include "backend/cuda/cuda_kernels.h"

/* ---- channel and column sums (bias gradients) ------------------------------ */
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

/* The ReLU + bias kernels (ym, MODE 4 below): elements (pixels) whose loads
 * a thread issues before their stores. */
enum { RELU_PIPE = 4 };

/* Block (c, k): sums elements j in chunk k of [0, n*hw) of channel c; beta:
 * put()'s, for split 1, where out is db (the partial sums get 0). ym (a
 * ReLU's output, cuk_relu_bwd_bias; NULL: none): each element is first
 * ym <= 0 ? 0 : dy, as k_relu_bwd writes it, and written to dxo. */
template <typename T, typename I>
__global__ void k_chan_partial(const T *dy, I n, I ch, I hw, int split, float beta, float *out,
                               const T *ym, T *dxo) {
    __shared__ float sh[CU_THREADS];
    I c = (I)blockIdx.x, k = (I)blockIdx.y;
    I total = n * hw;
    I chunk = (total + split - 1) / split;
    I j0 = k * chunk, j1 = j0 + chunk < total ? j0 + chunk : total;
    float acc = 0.0f;
    I j = j0 + (I)threadIdx.x, bd = (I)blockDim.x;
    if (ym)   /* RELU_PIPE elements' loads first (not held behind the stores),
                 then their stores and adds in the order of the loop below */
        for (; j + (RELU_PIPE - 1) * bd < j1; j += RELU_PIPE * bd) {
            I at[RELU_PIPE];
            float d[RELU_PIPE], yv[RELU_PIPE];
#pragma unroll
            for (int u = 0; u < RELU_PIPE; u++) {
                I jj = j + (I)u * bd, img = jj / hw;
                at[u] = (img * ch + c) * hw + (jj - img * hw);
                d[u] = ld(dy[at[u]]);
                yv[u] = ld(ym[at[u]]);
            }
#pragma unroll
            for (int u = 0; u < RELU_PIPE; u++) {
                float v = yv[u] <= 0.0f ? 0.0f : d[u];
                put(&dxo[at[u]], 0.0f, v);
                acc += v;
            }
        }
    for (; j < j1; j += bd) {
        I img = j / hw, p = j - img * hw, at = (img * ch + c) * hw + p;
        float d = ld(dy[at]);
        if (ym) {
            d = ld(ym[at]) <= 0.0f ? 0.0f : d;
            put(&dxo[at], 0.0f, d);
        }
        acc += d;
    }
    float r = block_sum(acc, sh);
    if (threadIdx.x == 0) put(&out[c * split + k], beta, r);
}

/* Channels-last: block (cb, k) sums pixels of chunk k of [0, n*hw) for
 * channels [32 cb, 32 cb + 32): thread (lane, row) takes channel 32 cb + lane
 * and every CU_THREADS/32-th pixel from its row; rows are then added in
 * order. Coalesced across the channels of a pixel. */
enum { CHAN_NHWC_C = 32 };
template <typename H>
__global__ void k_chan_partial_nhwc(const H *dy, int64_t pix, int64_t ch, int split, float beta,
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
        put(&out[c * split + k], beta, t);
    }
}

__global__ void k_chan_final(const float *partial, int64_t ch, int split, float beta, float *db) {
    GRID_STRIDE(c, ch) {
        float acc = 0.0f;
        for (int k = 0; k < split; k++) acc += partial[c * split + k];
        put(&db[c], beta, acc);
    }
}

static int chan_sum8(cudaStream_t s, const float *dy, int64_t pix, int64_t ch, int split,
                     float *partial, float beta, float *db, vd_dtype dt, vd_err *e);

int cuk_chan_sum(cudaStream_t s, const float *dy, int64_t n, int64_t ch, int64_t hw, int split,
                 float *partial, float beta, float *db, vd_dtype dt, bool cl, vd_err *e) {
    if (ch <= 0) return VD_OK;
    if (ch > 0x7fffffff || split < 1 || split > 65535)
        return vd_errf(e, VD_EINTERNAL, "cuk_chan_sum: bad shape (channels %lld, split %d)",
                       (long long)ch, split);
    dim3 grid((unsigned)ch, (unsigned)split);
    float *out = split == 1 ? db : partial;
    const float pbeta = split == 1 ? beta : 0.0f;   /* the partial sums are overwritten */
    if (cl && ch % 8 == 0 && ((uintptr_t)dy & 15u) == 0)
        return chan_sum8(s, dy, n * hw, ch, split, partial, beta, db, dt, e);
    if (cl) {
        dim3 gn((unsigned)((ch + CHAN_NHWC_C - 1) / CHAN_NHWC_C), (unsigned)split);
        DT_DISPATCH(dt, H, k_chan_partial_nhwc<H><<<gn, CU_THREADS, 0, s>>>(AS<H>(dy), n * hw, ch,
                                                                          split, pbeta, out));
    } else if (FITS32(n * ch * hw + (int64_t)split * CU_THREADS)) {
        k_chan_partial<float, int><<<grid, CU_THREADS, 0, s>>>(dy, (int)n, (int)ch, (int)hw, split,
                                                               pbeta, out, NULL, NULL);
    } else {
        k_chan_partial<float, int64_t><<<grid, CU_THREADS, 0, s>>>(dy, n, ch, hw, split, pbeta, out,
                                                                   NULL, NULL);
    }
    KERNEL_CHECK(e);
    if (split > 1) {
        k_chan_final<<<grid_for(ch, 132), CU_THREADS, 0, s>>>(partial, ch, split, beta, db);
        KERNEL_CHECK(e);
    }
    return VD_OK;
}

/* db[j] (+)= sum over rows i of dy[i, j] (fc bias gradient), rows in order;
 * beta: put()'s. */
template <typename T>
__global__ void k_col_sum(const T *dy, int64_t n, int64_t cols, float beta, float *db) {
    GRID_STRIDE(j, cols) {
        float acc = 0.0f;
        for (int64_t i = 0; i < n; i++) acc += ld(dy[i * cols + j]);
        put(&db[j], beta, acc);
    }
}

int cuk_col_sum(cudaStream_t s, const float *dy, int64_t n, int64_t cols, float beta, float *db,
                vd_dtype dt, vd_err *e) {
    if (cols <= 0) return VD_OK;
    DT_DISPATCH(dt, T, k_col_sum<T><<<grid_for(cols, 132), CU_THREADS, 0, s>>>(AS<T>(dy), n, cols,
                                                                              beta, db));
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

/* ---- batch norm, channels-last -------------------------------------------------
 * cuDNN's CUDNN_BATCHNORM_SPATIAL on NHWC bf16 is its slow general path; these
 * kernels follow the CPU reference (cpu_ops.c) instead. x, y, dy, dx: bf16,
 * fp16 or (math tf32) float (H)
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

/* y = (x - mean) * invstd * gamma + beta, as the CPU reference's float line:
 * one expression for the forward (k_bn_norm*) and the backward's ReLU mask
 * (bn_relu_dy), so that both compile to the same operations (the same
 * contraction into a multiply-add) and the mask sees the forward's bits. */
__device__ __forceinline__ float bn_affine(float x, float mu, float is, float ga, float be) {
    return (x - mu) * is * ga + be;
}

/* The backward of the ReLU in place after the batch norm (cu_layer.bwd_relu,
 * vd_op_io.relu_mask) on d, its output gradient: 0 where the y the forward
 * stored (bn_affine rounded to H) is <= 0, as k_relu_bwd* on that y. */
template <typename H>
__device__ __forceinline__ float bn_relu_dy(float x, float mu, float is, float ga, float be,
                                            float d) {
    H h;
    st(&h, bn_affine(x, mu, is, ga, be));
    return ld(h) <= 0.0f ? 0.0f : d;
}

/* y = bn_affine(x); relu: then max(y, 0) as cuk_relu_fwd (the ReLU in place
 * after the batch norm, cu_layer.fwd_relu). Clamping before the rounding to
 * H stores what the two ops store: rounding to nearest keeps the sign and
 * maps 0 to 0. */
template <typename H>
__global__ void k_bn_norm(const H *x, H *y, const float *aux, const float *g,
                          const float *bta, int64_t total, int ch, bool relu) {
    GRID_STRIDE(i, total) {
        int c = (int)(i % ch);
        float v = bn_affine(ld(x[i]), aux[c], aux[ch + c], g[c], bta[c]);
        st(&y[i], relu ? relu1(v) : v);
    }
}

/* part[0][c*split + k] = sum dy, part[1][...] = sum dy * (x - mean) over chunk k;
 * g, bta non-NULL: dy through the ReLU's backward first (bn_relu_dy). */
template <typename H>
__global__ void k_bn_bwd_part(const H *x, const H *dy, const float *aux, const float *g,
                              const float *bta, int64_t pix, int64_t ch, int split, float *part) {
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
            float d = ld(dy[j * ch + c]), xv = ld(x[j * ch + c]);
            if (g) d = bn_relu_dy<H>(xv, mu, aux[ch + c], g[c], bta[c], d);
            a += d;
            b += d * (xv - mu);
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
 * the sums (k_bn_bwd_final); beta: accumulate into dx; bta non-NULL: dy
 * through the ReLU's backward first (bn_relu_dy). */
template <typename H>
__global__ void k_bn_dx(const H *x, const H *dy, H *dx, const float *aux,
                        const float *g, const float *bta, const float *dw, const float *db,
                        float beta, int64_t total, int ch, float inv_m) {
    GRID_STRIDE(i, total) {
        int c = (int)(i % ch);
        float is = aux[ch + c], xv = ld(x[i]), d = ld(dy[i]);
        if (bta) d = bn_relu_dy<H>(xv, aux[c], is, g[c], bta[c], d);
        float xh = (xv - aux[c]) * is;
        float v = g[c] * is * (d - db[c] * inv_m - xh * dw[c] * inv_m);
        put(&dx[i], beta, v);
    }
}

/* MODE 4's step on eight channels of one pixel: d through the ReLU whose
 * output is y (y <= 0 ? 0 : d, as k_relu_bwd8), stored to dx, added to a. */
template <typename H>
__device__ __forceinline__ void relu_sum8(bf8 d, const bf8 &y, H *dx, float *a) {
#pragma unroll
    for (int q = 0; q < 8; q++) d.v[q] = y.v[q] <= 0.0f ? 0.0f : d.v[q];
    st8(dx, d);
#pragma unroll
    for (int q = 0; q < 8; q++) a[q] += d.v[q];
}

/* Per channel over pixel chunk k of split (block (bx, k)): MODE 0 (forward
 * statistics) sums x - x0[c] and its square (x0 = the first pixel's value),
 * MODE 1 (backward) sums dy and dy * (x - mean[c]), MODE 3 the same with dy
 * through the ReLU's backward first (bn_relu_dy: mean = aux, g and bta the
 * batch norm's parameters), MODE 2 (bias gradient) sums x alone and writes
 * only the first half of part, MODE 4 (a ReLU's backward with its conv's
 * bias gradient, cuk_relu_bwd_bias) writes dxo = (x <= 0 ? 0 : dy), x the
 * ReLU's output, as k_relu_bwd8 does, and sums that as MODE 2 sums its x,
 * MODE 5 (a batch norm's backward that takes the ReLU after its add,
 * vd_op_io.relu_y) takes dy through that ReLU's backward first (ry <= 0 ?
 * 0 : dy, ry the ReLU's output, as k_relu_bwd8), writes it to dxo (dy's
 * own storage: what the add's other inputs read), and sums it as MODE 1.
 * Thread (lane, row) takes channels 8 (bx tpr + lane) .. +7 and every
 * rows-th pixel of the chunk in 16-byte loads; rows are added in order,
 * then k_red_final adds the split partials: a fixed order, bit-identical
 * run to run. beta: put()'s for the first half of part (MODE 2 with split 1
 * writes the bias gradient there straight; else 0). */
template <int MODE, typename H>
__global__ void k_chan_red8(const H *x, const H *dy, const H *ry, const float *mean,
                            const float *g, const float *bta, int64_t pix, int64_t ch, int split,
                            int tpr, float beta, float *part, H *dxo) {
    __shared__ float sa[CU_THREADS * 8], sb[CU_THREADS * 8];
    const int lane = threadIdx.x % tpr, row = threadIdx.x / tpr, rows = blockDim.x / tpr;
    int64_t c0 = ((int64_t)blockIdx.x * tpr + lane) * 8, k = blockIdx.y;
    int64_t chunk = (pix + split - 1) / split;
    int64_t j0 = k * chunk, j1 = j0 + chunk < pix ? j0 + chunk : pix;
    float a[8], b[8], sh[8], is[8], ga[8], be[8];
#pragma unroll
    for (int q = 0; q < 8; q++) a[q] = b[q] = sh[q] = is[q] = ga[q] = be[q] = 0.0f;
    bool on = row < rows && c0 < ch;
    if (on) {
        if (MODE == 0) {
            bf8 f = ld8(x + c0);
#pragma unroll
            for (int q = 0; q < 8; q++) sh[q] = f.v[q];
        } else if (MODE == 1 || MODE == 3 || MODE == 5) {
#pragma unroll
            for (int q = 0; q < 8; q++) sh[q] = mean[c0 + q];
        }
        if (MODE == 3) {
#pragma unroll
            for (int q = 0; q < 8; q++) {
                is[q] = mean[ch + c0 + q];
                ga[q] = g[c0 + q];
                be[q] = bta[c0 + q];
            }
        }
        int64_t j = j0 + row;
        if (MODE == 4)   /* RELU_PIPE pixels' loads first (not held behind the
                            stores), then their stores and adds in pixel order */
            for (; j + (RELU_PIPE - 1) * rows < j1; j += RELU_PIPE * rows) {
                bf8 yv[RELU_PIPE], d[RELU_PIPE];
#pragma unroll
                for (int u = 0; u < RELU_PIPE; u++) {
                    yv[u] = ld8(x + (j + u * rows) * ch + c0);
                    d[u] = ld8(dy + (j + u * rows) * ch + c0);
                }
#pragma unroll
                for (int u = 0; u < RELU_PIPE; u++)
                    relu_sum8(d[u], yv[u], dxo + (j + u * rows) * ch + c0, a);
            }
#pragma unroll 4
        for (; j < j1; j += rows) {
            bf8 xv = ld8(x + j * ch + c0);
            if (MODE == 2) {
#pragma unroll
                for (int q = 0; q < 8; q++) a[q] += xv.v[q];
            } else if (MODE == 4) {
                relu_sum8(ld8(dy + j * ch + c0), xv, dxo + j * ch + c0, a);
            } else if (MODE == 0) {
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    float d = xv.v[q] - sh[q];
                    a[q] += d;
                    b[q] += d * d;
                }
            } else {
                bf8 d = ld8(dy + j * ch + c0);
                if (MODE == 5) {
                    bf8 yv = ld8(ry + j * ch + c0);
#pragma unroll
                    for (int q = 0; q < 8; q++) d.v[q] = yv.v[q] <= 0.0f ? 0.0f : d.v[q];
                    st8(dxo + j * ch + c0, d);
                }
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    if (MODE == 3) d.v[q] = bn_relu_dy<H>(xv.v[q], sh[q], is[q], ga[q], be[q], d.v[q]);
                    a[q] += d.v[q];
                    b[q] += d.v[q] * (xv.v[q] - sh[q]);
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
            put(&part[(c0 + q) * split + k], beta, a[q]);
            if (MODE != 2 && MODE != 4) part[ch * split + (c0 + q) * split + k] = b[q];
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

__global__ void k_chan_final_w(const float *part, int64_t ch, int split, float beta, float *db) {
    int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (c >= ch) return;
    const int lane = threadIdx.x % 32;
    float a = 0.0f;
    for (int k = lane; k < split; k += 32) a += part[c * split + k];
    for (int o = 16; o > 0; o >>= 1) a += __shfl_down_sync(0xffffffffu, a, o);
    if (lane == 0) put(&db[c], beta, a);
}

static unsigned warps_grid(int64_t ch) { return (unsigned)((ch * 32 + CU_THREADS - 1) / CU_THREADS); }

/* Channels c0 .. c0 + 7's statistics (aux: [mean C | invstd C]), gamma and
 * beta, into registers: the channels-last kernels' prologue. */
__device__ __forceinline__ void bn_chan8(const float *aux, const float *g, const float *bta,
                                         int ch, int c0, float mu[8], float is[8], float ga[8],
                                         float be[8]) {
#pragma unroll
    for (int k = 0; k < 8; k++) {
        mu[k] = aux[c0 + k];
        is[k] = aux[ch + c0 + k];
        ga[k] = g[c0 + k];
        be[k] = bta[c0 + k];
    }
}

/* k_bn_norm / k_bn_dx with the channel parameters in registers: block
 * (bx, by) of tpr x rows threads; thread (lane, row) keeps channels
 * 8 (bx tpr + lane) .. +7 and walks pixels by*rows + row, stepping
 * gridDim.y * rows. Same arithmetic per element as k_bn_norm / k_bn_dx. */
template <typename H>
__global__ void k_bn_norm8p(const H *x, H *y, const float *aux, const float *g,
                            const float *bta, int64_t pix, int ch, int tpr, bool relu) {
    const int lane = threadIdx.x % tpr, row = threadIdx.x / tpr, rows = blockDim.x / tpr;
    int c0 = ((int)blockIdx.x * tpr + lane) * 8;
    if (row >= rows || c0 >= ch) return;
    float mu[8], is[8], ga[8], be[8];
    bn_chan8(aux, g, bta, ch, c0, mu, is, ga, be);
    for (int64_t j = (int64_t)blockIdx.y * rows + row; j < pix; j += (int64_t)gridDim.y * rows) {
        bf8 v = ld8(x + j * ch + c0);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float t = bn_affine(v.v[k], mu[k], is[k], ga[k], be[k]);
            v.v[k] = relu ? relu1(t) : t;
        }
        st8(y + j * ch + c0, v);
    }
}

template <typename H>
__global__ void k_bn_dx8p(const H *x, const H *dy, H *dx, const float *aux,
                          const float *g, const float *bta, const float *dw, const float *db,
                          float beta, int64_t pix, int ch, int tpr, float inv_m) {
    const int lane = threadIdx.x % tpr, row = threadIdx.x / tpr, rows = blockDim.x / tpr;
    int c0 = ((int)blockIdx.x * tpr + lane) * 8;
    if (row >= rows || c0 >= ch) return;
    float mu[8], is[8], ga[8], be[8], sb[8], sw[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
        mu[k] = aux[c0 + k];
        is[k] = aux[ch + c0 + k];
        ga[k] = g[c0 + k];
        be[k] = bta ? bta[c0 + k] : 0.0f;
        sb[k] = db[c0 + k] * inv_m;
        sw[k] = dw[c0 + k] * inv_m;
    }
    for (int64_t j = (int64_t)blockIdx.y * rows + row; j < pix; j += (int64_t)gridDim.y * rows) {
        bf8 xv = ld8(x + j * ch + c0), d = ld8(dy + j * ch + c0);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            if (bta) d.v[k] = bn_relu_dy<H>(xv.v[k], mu[k], is[k], ga[k], be[k], d.v[k]);
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

/* Bias gradient of channels-last dy (16-bit or float; ch % 8 == 0, dy 16-byte aligned):
 * split == 1 writes db straight away. */
static int chan_sum8(cudaStream_t s, const float *dy, int64_t pix, int64_t ch, int split,
                     float *partial, float beta, float *db, vd_dtype dt, vd_err *e) {
    dim3 g8((unsigned)bn_gx(ch), (unsigned)split);
    float *out = split == 1 ? db : partial;
    DT_DISPATCH(dt, H, k_chan_red8<2, H><<<g8, CU_THREADS, 0, s>>>(AS<H>(dy), NULL, NULL, NULL,
                                                                   NULL, NULL, pix, ch, split,
                                                                   bn_tpr(ch),
                                                                   split == 1 ? beta : 0.0f, out,
                                                                   NULL));
    KERNEL_CHECK(e);
    if (split > 1) {
        k_chan_final_w<<<warps_grid(ch), CU_THREADS, 0, s>>>(partial, ch, split, beta, db);
        KERNEL_CHECK(e);
    }
    return VD_OK;
}

int cu_bias_grad_split(int64_t n, int64_t ch, int64_t hw, int sm_count, bool cl,
                       uint64_t ws_bytes) {
    int split = cu_chan_split(n, ch, hw, sm_count, cl);
    return split > 1 && (uint64_t)split * (uint64_t)ch * sizeof(float) > ws_bytes ? 1 : split;
}

int cuk_relu_bwd_bias(cudaStream_t s, int sm, const float *y, const float *dy, float *dx,
                      int64_t n, int64_t ch, int64_t hw, int split, float *partial, float *db,
                      vd_dtype dt, bool cl, vd_err *e) {
    if (n <= 0 || ch <= 0) return VD_OK;
    if (ch > 0x7fffffff || split < 1 || split > 65535)
        return vd_errf(e, VD_EINTERNAL, "cuk_relu_bwd_bias: bad shape (channels %lld, split %d)",
                       (long long)ch, split);
    float *out = split == 1 ? db : partial;
    if (cl && ch % 8 == 0 && al16(dx) && al16(y) && al16(dy)) {
        /* cuk_chan_sum's chan_sum8 (dx is 16-byte aligned), the ReLU in front */
        dim3 g8((unsigned)bn_gx(ch), (unsigned)split);
        DT_DISPATCH(dt, H, k_chan_red8<4, H><<<g8, CU_THREADS, 0, s>>>(
                                 AS<H>(y), AS<H>(dy), NULL, NULL, NULL, NULL, n * hw, ch,
                                 split, bn_tpr(ch), 0.0f, out, AS<H>(dx)));
        KERNEL_CHECK(e);
        if (split > 1) {
            k_chan_final_w<<<warps_grid(ch), CU_THREADS, 0, s>>>(partial, ch, split, 0.0f, db);
            KERNEL_CHECK(e);
        }
        return VD_OK;
    }
    if (!cl) {
        /* cuk_chan_sum's k_chan_partial (NCHW: fp32), the ReLU in front */
        dim3 grid((unsigned)ch, (unsigned)split);
        if (FITS32(n * ch * hw + (int64_t)split * CU_THREADS))
            k_chan_partial<float, int><<<grid, CU_THREADS, 0, s>>>(dy, (int)n, (int)ch, (int)hw,
                                                                   split, 0.0f, out, y, dx);
        else
            k_chan_partial<float, int64_t><<<grid, CU_THREADS, 0, s>>>(dy, n, ch, hw, split, 0.0f,
                                                                       out, y, dx);
        KERNEL_CHECK(e);
        if (split > 1) {
            k_chan_final<<<grid_for(ch, 132), CU_THREADS, 0, s>>>(partial, ch, split, 0.0f, db);
            KERNEL_CHECK(e);
        }
        return VD_OK;
    }
    /* the channels-last shapes the kernels above do not take: the two passes */
    int rc = cuk_relu_bwd(s, sm, y, dy, dx, 0.0f, n * ch * hw, dt, e);
    return rc ? rc : cuk_chan_sum(s, dx, n, ch, hw, split, partial, 0.0f, db, dt, cl, e);
}

template <typename H>
static int bn_fwd_nhwc(cudaStream_t s, int sm, const float *x, float *y, const float *gamma,
                       const float *beta, float *aux, float *rm, float *rv, int64_t pix, int64_t ch,
                       cu_bn_mode mode, float eps, float momentum, void *ws, uint64_t ws_bytes,
                       bool relu, vd_err *e) {
    if (pix <= 0 || ch <= 0) return VD_OK;
    if (ch > 0x7fffffff)
        return vd_errf(e, VD_EINTERNAL, "bn (channels-last): %lld channels", (long long)ch);
    if (mode == CU_BN_TRAIN) {
        int split = cu_bn_split(pix, ch, sm);
        if (!ws || ws_bytes < cu_bn_ws_bytes(pix, ch, sm))
            return vd_errf(e, VD_EINTERNAL,
                           "bn (channels-last): workspace %llu bytes, needs %llu",
                           (unsigned long long)ws_bytes,
                           (unsigned long long)cu_bn_ws_bytes(pix, ch, sm));
        if (ch % 8 == 0 && al16(x)) {
            int tpr = bn_tpr(ch);
            dim3 g8((unsigned)bn_gx(ch), (unsigned)split);
            k_chan_red8<0, H><<<g8, CU_THREADS, 0, s>>>(AS<H>(x), NULL, NULL, NULL, NULL, NULL,
                                                    pix, ch, split, tpr, 0.0f, (float *)ws, NULL);
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
    } else if (mode == CU_BN_EVAL) {
        int rc = cuk_bn_eval_aux(s, rm, rv, aux, (int)ch, eps, e);
        if (rc) return rc;
    }   /* CU_BN_APPLY: aux holds the statistics already */
    if (!y) return VD_OK;   /* folded into its add (vd_op_io.bn_stats): no y */
    int64_t total = pix * ch;
    if (ch % 8 == 0 && vec8_ok(total, x, y)) {
        k_bn_norm8p<H><<<bn_elt_grid(pix, ch, sm), CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(y), aux, gamma, beta,
                                                                    pix, (int)ch, bn_tpr(ch), relu);
        KERNEL_CHECK(e);
        return VD_OK;
    }
    k_bn_norm<H><<<grid_for(total, sm), CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(y), aux, gamma, beta, total,
                                                        (int)ch, relu);
    KERNEL_CHECK(e);
    return VD_OK;
}

/* relu: dy through the ReLU's backward as it is read (bn_relu_dy; beta, the
 * batch norm's shift, then needed). ry: dy rewritten in place first by the
 * backward of the ReLU after the add (ry its output), in the reduction pass
 * (MODE 5) where it takes the shapes, else by cuk_relu_bwd. */
template <typename H>
static int bn_bwd_nhwc(cudaStream_t s, int sm, const float *x, const float *dy, float *dx,
                       float dx_beta, const float *gamma, const float *beta, const float *aux,
                       float *dw, float *db, int64_t pix, int64_t ch, void *ws, uint64_t ws_bytes,
                       bool relu, const float *ry, vd_dtype dt, vd_err *e) {
    if (pix <= 0 || ch <= 0) return VD_OK;
    int split = cu_bn_split(pix, ch, sm);
    if (!ws || ws_bytes < cu_bn_ws_bytes(pix, ch, sm) || ch > 0x7fffffff)
        return vd_errf(e, VD_EINTERNAL, "bn backward (channels-last): workspace %llu bytes, "
                       "needs %llu", (unsigned long long)ws_bytes,
                       (unsigned long long)cu_bn_ws_bytes(pix, ch, sm));
    if (relu && !beta)
        return vd_errf(e, VD_EINTERNAL, "bn backward (channels-last): the ReLU's mask needs beta");
    if (relu && ry)
        return vd_errf(e, VD_EINTERNAL, "bn backward (channels-last): two ReLUs' backward");
    const float *bta = relu ? beta : NULL;   /* the kernels' "mask dy" */
    float *dyw = (float *)dy;   /* (ry: dy's storage is the ReLU's dx, writable) */
    const bool red8 = ch % 8 == 0 && al16(x) && al16(dy);
    if (ry && !(red8 && al16(ry))) {
        int rc = cuk_relu_bwd(s, sm, ry, dy, dyw, 0.0f, pix * ch, dt, e);
        if (rc) return rc;
        ry = NULL;
    }
    if (red8) {
        dim3 g8((unsigned)bn_gx(ch), (unsigned)split);
        if (relu)
            k_chan_red8<3, H><<<g8, CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(dy), NULL, aux, gamma, bta,
                                                    pix, ch, split, bn_tpr(ch), 0.0f, (float *)ws,
                                                    NULL);
        else if (ry)
            k_chan_red8<5, H><<<g8, CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(dy), AS<H>(ry), aux, NULL,
                                                    NULL, pix, ch, split, bn_tpr(ch), 0.0f,
                                                    (float *)ws, AS<H>(dyw));
        else
            k_chan_red8<1, H><<<g8, CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(dy), NULL, aux, NULL, NULL,
                                                    pix, ch, split, bn_tpr(ch), 0.0f, (float *)ws,
                                                    NULL);
        KERNEL_CHECK(e);
        k_bn_bwd_final_w<<<warps_grid(ch), CU_THREADS, 0, s>>>((const float *)ws, aux, ch, split,
                                                              dw, db);
        KERNEL_CHECK(e);
    } else {
        dim3 gr((unsigned)((ch + BN_LANES - 1) / BN_LANES), (unsigned)split);
        k_bn_bwd_part<H><<<gr, CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(dy), aux, relu ? gamma : NULL,
                                                   bta, pix, ch, split, (float *)ws);
        KERNEL_CHECK(e);
        k_bn_bwd_final_w<<<warps_grid(ch), CU_THREADS, 0, s>>>((const float *)ws, aux, ch, split,
                                                              dw, db);
        KERNEL_CHECK(e);
    }
    int64_t total = pix * ch;
    if (ch % 8 == 0 && vec8_ok(total, x, dy, dx)) {
        k_bn_dx8p<H><<<bn_elt_grid(pix, ch, sm), CU_THREADS, 0, s>>>(
            AS<H>(x), AS<H>(dy), AS<H>(dx), aux, gamma, bta, dw, db, dx_beta, pix, (int)ch,
            bn_tpr(ch), (float)(1.0 / (double)pix));
        KERNEL_CHECK(e);
        return VD_OK;
    }
    k_bn_dx<H><<<grid_for(total, sm), CU_THREADS, 0, s>>>(AS<H>(x), AS<H>(dy), AS<H>(dx), aux, gamma, bta,
                                                      dw, db, dx_beta, total, (int)ch,
                                                      (float)(1.0 / (double)pix));
    KERNEL_CHECK(e);
    return VD_OK;
}

int cuk_bn_fwd_nhwc(cudaStream_t s, int sm, const float *x, float *y, const float *gamma,
                    const float *beta, float *aux, float *rm, float *rv, int64_t pix, int64_t ch,
                    cu_bn_mode mode, float eps, float momentum, void *ws, uint64_t ws_bytes,
                    bool relu, vd_dtype dt, vd_err *e) {
    DT_DISPATCH(dt, H, return bn_fwd_nhwc<H>(s, sm, x, y, gamma, beta, aux, rm, rv, pix, ch,
                                               mode, eps, momentum, ws, ws_bytes, relu, e));
    return VD_OK;   /* not reached */
}

/* ---- the batch norm + add fusion (vd_op_io.bn_aux) ------------------------
 * y = x[0] + ... + x[kin-1] as k_add / k_add8 sum it (in float, left to
 * right, one rounding at the end; relu: relu1 before it), where input bk is
 * the batch norm's x: its y, bn_affine (the batch norm's own expression, so
 * the same contraction as k_bn_norm*) rounded to H as k_bn_norm* store it,
 * read back, takes its place. Channels-last: channel = element % ch. The
 * bits of k_bn_norm* then k_add*. */
template <typename H>
__device__ __forceinline__ float bn_stored(float x, float mu, float is, float ga, float be) {
    H h;
    st(&h, bn_affine(x, mu, is, ga, be));
    return ld(h);
}

/* k_bn_norm8p's layout: thread (lane, row) of block (bx, by) keeps channels
 * 8 (bx tpr + lane) .. +7 in registers and walks pixels by rows + row,
 * stepping gridDim.y rows (ch % 8 == 0, every operand 16-byte aligned). */
template <typename H>
__global__ void k_bn_add8p(cu_ptrs<H> x, int kin, int bk, H *y, const float *aux,
                           const float *g, const float *bta, int64_t pix, int ch, int tpr,
                           bool relu) {
    const int lane = threadIdx.x % tpr, row = threadIdx.x / tpr, rows = blockDim.x / tpr;
    int c0 = ((int)blockIdx.x * tpr + lane) * 8;
    if (row >= rows || c0 >= ch) return;
    float mu[8], is[8], ga[8], be[8];
    bn_chan8(aux, g, bta, ch, c0, mu, is, ga, be);
    for (int64_t j = (int64_t)blockIdx.y * rows + row; j < pix; j += (int64_t)gridDim.y * rows) {
        const int64_t at = j * ch + c0;
        bf8 acc;
        for (int q = 0; q < kin; q++) {
            bf8 v = ld8(x.p[q] + at);
            if (q == bk)
#pragma unroll
                for (int k = 0; k < 8; k++) v.v[k] = bn_stored<H>(v.v[k], mu[k], is[k], ga[k], be[k]);
            if (q == 0) acc = v;
            else
#pragma unroll
                for (int k = 0; k < 8; k++) acc.v[k] = __fadd_rn(acc.v[k], v.v[k]);
        }
        if (relu)
#pragma unroll
            for (int k = 0; k < 8; k++) acc.v[k] = relu1(acc.v[k]);
        st8(y + at, acc);
    }
}

template <typename H>
__global__ void k_bn_add(cu_ptrs<H> x, int kin, int bk, H *y, const float *aux, const float *g,
                         const float *bta, int64_t total, int ch, bool relu) {
    GRID_STRIDE(i, total) {
        int c = (int)(i % ch);
        float acc = 0.0f;
        for (int q = 0; q < kin; q++) {
            float v = ld(x.p[q][i]);
            if (q == bk) v = bn_stored<H>(v, aux[c], aux[ch + c], g[c], bta[c]);
            acc = q == 0 ? v : __fadd_rn(acc, v);
        }
        st(&y[i], relu ? relu1(acc) : acc);
    }
}

template <typename H>
static int bn_add_nhwc(cudaStream_t s, int sm, const float *const *x, int kin, int bk, float *y,
                       const float *aux, const float *gamma, const float *beta, int64_t pix,
                       int64_t ch, bool relu, vd_err *e) {
    cu_ptrs<H> ps;
    for (int q = 0; q < VD_MAX_INPUTS; q++) ps.p[q] = q < kin ? AS<H>(x[q]) : NULL;
    int64_t total = pix * ch;
    bool v8 = ch % 8 == 0 && vec8_ok(total, y);
    for (int q = 0; v8 && q < kin; q++) v8 = al16(x[q]);
    if (v8)
        k_bn_add8p<H><<<bn_elt_grid(pix, ch, sm), CU_THREADS, 0, s>>>(
            ps, kin, bk, AS<H>(y), aux, gamma, beta, pix, (int)ch, bn_tpr(ch), relu);
    else
        k_bn_add<H><<<grid_for(total, sm), CU_THREADS, 0, s>>>(ps, kin, bk, AS<H>(y), aux, gamma,
                                                              beta, total, (int)ch, relu);
    KERNEL_CHECK(e);
    return VD_OK;
}

int cuk_bn_add_nhwc(cudaStream_t s, int sm, const float *const *x, int kin, int bk, float *y,
                    const float *aux, const float *gamma, const float *beta, int64_t pix,
                    int64_t ch, bool relu, vd_dtype dt, vd_err *e) {
    if (pix <= 0 || ch <= 0) return VD_OK;
    if (kin < 1 || kin > VD_MAX_INPUTS || bk < 0 || bk >= kin || ch > 0x7fffffff)
        return vd_errf(e, VD_EINTERNAL, "batch norm + add: input %d of %d, %lld channels", bk,
                       kin, (long long)ch);
    DT_DISPATCH(dt, H, return bn_add_nhwc<H>(s, sm, x, kin, bk, y, aux, gamma, beta, pix, ch,
                                             relu, e));
    return VD_OK;   /* not reached */
}

int cuk_bn_bwd_nhwc(cudaStream_t s, int sm, const float *x, const float *dy, float *dx,
                    float dx_beta, const float *gamma, const float *beta, const float *aux,
                    float *dw, float *db, int64_t pix, int64_t ch, void *ws, uint64_t ws_bytes,
                    bool relu, const float *ry, vd_dtype dt, vd_err *e) {
    DT_DISPATCH(dt, H, return bn_bwd_nhwc<H>(s, sm, x, dy, dx, dx_beta, gamma, beta, aux, dw, db,
                                             pix, ch, ws, ws_bytes, relu, ry, dt, e));
    return VD_OK;   /* not reached */
}

/* ---- LRN (torch.nn.LocalResponseNorm) ------------------------------------- *
 * s_c = k + alpha * (sum_{j=c-size/2}^{c+(size-1)/2} x_j^2) / size,
 * y_c = x_c / s_c^beta. */
template <bool CL, typename T, typename I>
__device__ __forceinline__ float lrn_scale(const T *col, I hw, int ch, int c, int size,
                                           float alpha, float k) {
    int lo = c - size / 2, hi = c + (size - 1) / 2;
    if (lo < 0) lo = 0;
    if (hi > ch - 1) hi = ch - 1;
    float acc = 0.0f;
    const I cs = CL ? (I)1 : hw;   /* channel stride */
    for (int j = lo; j <= hi; j++) {
        float v = ld(col[j * cs]);
        acc += v * v;
    }
    return k + alpha * (acc / (float)size);
}

template <bool CL, typename T, typename I>
__global__ void k_lrn_fwd(const T *x, T *y, I total, int ch, I hw, int size, float alpha,
                          float beta, float k) {
    GRID_STRIDE_T(I, i, total) {
        const T *col;
        int c;
        if (CL) {   /* i = pixel*ch + c */
            I pix = i / ch;
            c = (int)(i - pix * ch);
            col = x + pix * ch;
        } else {
            I t = i / hw, p = i - t * hw;
            I img = t / ch;
            c = (int)(t - img * ch);
            col = x + img * ch * hw + p;
        }
        float s = lrn_scale<CL>(col, hw, ch, c, size, alpha, k);
        st(&y[i], ld(x[i]) / powf(s, beta));
    }
}

int cuk_lrn_fwd(cudaStream_t s, int sm, const float *x, float *y, int n, int ch, int64_t hw,
                int size, float alpha, float beta, float k, vd_dtype dt, bool cl, vd_err *e) {
    int64_t total = (int64_t)n * ch * hw;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    if (FITS32(total))
        CL_DISPATCH(cl, CL, DT_DISPATCH(dt, T, k_lrn_fwd<CL, T, int><<<gr, CU_THREADS, 0, s>>>(
                                                   AS<T>(x), AS<T>(y), (int)total, ch, (int)hw,
                                                   size, alpha, beta, k)));
    else
        CL_DISPATCH(cl, CL, DT_DISPATCH(dt, T, k_lrn_fwd<CL, T, int64_t><<<gr, CU_THREADS, 0, s>>>(
                                                   AS<T>(x), AS<T>(y), total, ch, hw, size, alpha,
                                                   beta, k)));
    KERNEL_CHECK(e);
    return VD_OK;
}

/* dx_i = dy_i / s_i^beta - (2 alpha beta / size) x_i sum_{c: i in win(c)}
 *        dy_c x_c / (s_c^beta s_c),  win(c) = [c - size/2, c + (size-1)/2]. */
template <bool CL, typename T, typename I>
__global__ void k_lrn_bwd(const T *x, const T *dy, T *dx, float dx_beta, I total,
                          int ch, I hw, int size, float alpha, float beta, float k) {
    GRID_STRIDE_T(I, i, total) {
        I base, cs;
        int ci;
        if (CL) {
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
        float si = lrn_scale<CL>(col, hw, ch, ci, size, alpha, k);
        int c0 = ci - (size - 1) / 2, c1 = ci + size / 2;
        if (c0 < 0) c0 = 0;
        if (c1 > ch - 1) c1 = ch - 1;
        float acc = 0.0f;
        for (int c = c0; c <= c1; c++) {
            float sc = c == ci ? si : lrn_scale<CL>(col, hw, ch, c, size, alpha, k);
            acc += ld(dcol[c * cs]) * ld(col[c * cs]) / (powf(sc, beta) * sc);
        }
        float g = ld(dcol[ci * cs]) / powf(si, beta) -
                  2.0f * alpha * beta / (float)size * ld(col[ci * cs]) * acc;
        put(&dx[i], dx_beta, g);
    }
}

int cuk_lrn_bwd(cudaStream_t s, int sm, const float *x, const float *dy, float *dx, float dx_beta,
                int n, int ch, int64_t hw, int size, float alpha, float beta, float k, vd_dtype dt,
                bool cl, vd_err *e) {
    int64_t total = (int64_t)n * ch * hw;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    if (FITS32(total))
        CL_DISPATCH(cl, CL, DT_DISPATCH(dt, T, k_lrn_bwd<CL, T, int><<<gr, CU_THREADS, 0, s>>>(
                                                   AS<T>(x), AS<T>(dy), AS<T>(dx), dx_beta,
                                                   (int)total, ch, (int)hw, size, alpha, beta,
                                                   k)));
    else
        CL_DISPATCH(cl, CL, DT_DISPATCH(dt, T, k_lrn_bwd<CL, T, int64_t><<<gr, CU_THREADS, 0, s>>>(
                                                   AS<T>(x), AS<T>(dy), AS<T>(dx), dx_beta, total,
                                                   ch, hw, size, alpha, beta, k)));
    KERNEL_CHECK(e);
    return VD_OK;
}
