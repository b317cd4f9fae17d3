/* cuda_k_sgd.cu — the optimizer step (SGD) and dynamic loss scaling. */
#include "backend/cuda/cuda_kernels.h"

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
