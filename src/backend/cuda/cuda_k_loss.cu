/* cuda_k_loss.cu — softmax cross-entropy: forward (softmax and mean loss)
 * and backward. */
#include "backend/cuda/cuda_kernels.h"

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
 * t+1024, ... of the n counted ones from the logits (log-sum-exp, as
 * PyTorch's log_softmax) and whether their argmax (the first of equal
 * maxima) is the label, then fixed-order tree sums; loss[0] = the losses'
 * sum / fn (fn: the counted samples of the whole batch), loss[1] = the hits,
 * or a chunk after the first (acc) adds them to loss[0] and loss[1]
 * (backend.h). */
enum { XENT_LOSS_THREADS = 1024 };
template <typename T>
__global__ void k_xent_loss(const T *x, const int32_t *labels, float *loss, int n,
                            int classes, float fn, bool acc_loss) {
    __shared__ float sh[XENT_LOSS_THREADS];
    float acc = 0.0f, hits = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const T *xr = x + (int64_t)i * classes;
        int lab = labels[i];
        if (lab < 0 || lab >= classes) { acc += NAN; continue; }
        float m = -INFINITY;
        int arg = 0;
        for (int j = 0; j < classes; j++) {
            float v = ld(xr[j]);
            if (v > m) { m = v; arg = j; }
        }
        float s = 0.0f;
        for (int j = 0; j < classes; j++) s += expf(ld(xr[j]) - m);
        acc += -((ld(xr[lab]) - m) - logf(s));
        hits += arg == lab ? 1.0f : 0.0f;
    }
    float total = block_sum(acc, sh);
    float hit_total = block_sum(hits, sh);
    if (threadIdx.x == 0) {
        loss[0] = acc_loss ? __fadd_rn(loss[0], total / fn) : total / fn;
        loss[1] = acc_loss ? __fadd_rn(loss[1], hit_total) : hit_total;
    }
}

int cuk_xent_fwd(cudaStream_t s, const float *x, const int32_t *labels, float *y, float *loss,
                 int n, int classes, int n0, int counted, bool acc, vd_dtype dt, vd_err *e) {
    if (n <= 0) return VD_OK;
    DT_DISPATCH(dt, T, k_softmax<T><<<(unsigned)n, CU_THREADS, 0, s>>>(AS<T>(x), AS<T>(y), classes));
    KERNEL_CHECK(e);
    if (loss) {
        /* the chunk's counted samples: those before the batch's counted-th */
        int nc = counted - n0 < n ? counted - n0 : n;
        if (nc < 0) nc = 0;
        DT_DISPATCH(dt, T, k_xent_loss<T><<<1, XENT_LOSS_THREADS, 0, s>>>(
                               AS<T>(x), labels, loss, nc, classes, (float)counted, acc));
        KERNEL_CHECK(e);
    }
    return VD_OK;
}

/* dx = (softmax - onehot(label)) / n_batch (the whole batch's samples); dy
 * is not read (the loss is last).
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
                 float beta, int n, int n_batch, int classes, const float *scale, vd_dtype dt,
                 vd_err *e) {
    int64_t total = (int64_t)n * classes;
    if (total <= 0) return VD_OK;
    unsigned gr = grid_for(total, sm);
    if (FITS32(total))
        DT_DISPATCH(dt, T, k_xent_bwd<T, int><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(y), labels, AS<T>(dx), beta, (int)total, classes,
                               (float)n_batch, scale));
    else
        DT_DISPATCH(dt, T, k_xent_bwd<T, int64_t><<<gr, CU_THREADS, 0, s>>>(
                               AS<T>(y), labels, AS<T>(dx), beta, total, classes, (float)n_batch,
                               scale));
    KERNEL_CHECK(e);
    return VD_OK;
}
