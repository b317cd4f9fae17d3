/* cuda_k_sgd.cu — the optimizer's update (SGD, AdamW) and dynamic loss
 * scaling. */
#include "backend/cuda/cuda_kernels.h"

/* ---- the update (backend.h's vd_optim_step) ----------------------------------
 * The CPU backend's float operations in its order, each an explicit _rn
 * intrinsic (nvcc would otherwise contract a multiply and an add into an
 * FMA): the same bits as the CPU reference. One launch updates every range
 * of a table (R[0, nr), device memory): each block walks the ranges in
 * order and strides over each, at the step scalars' lr (S, device memory)
 * times the range's lr_mult, so the launch's arguments are the same every
 * step. The gradient is first multiplied by inv (the loss scale's
 * reciprocal, math fp16; 1 changes nothing). st: the loss scale's state
 * (update_scaled: nothing is done when it says found_inf, and inv is the
 * reciprocal of its scale, computed in double and rounded to float as
 * torch's unscale_), NULL for update. */

/* SGD: d = g + wd*p; buf = fresh ? d : momentum*buf + d (fresh: the first
 * update, or momentum 0: the old buffer, maybe poison, is never read);
 * step = nesterov ? d + momentum*buf : buf; p = p - lr*step. */
__global__ void k_sgd(float *p, const float *grad, float *m, const vd_update_range *R, int nr,
                      const vd_step_scalars *S, float momentum, float wd, bool nesterov,
                      const vd_loss_scale *st) {
    if (st && st->found_inf) return;
    const float inv = st ? (float)(1.0 / (double)st->scale) : 1.0f;
    const bool fresh = S->t == 1 || momentum == 0.0f;
    for (int r = 0; r < nr; r++) {
        const int64_t off = R[r].offset, n = R[r].count;
        const float lr = __fmul_rn(S->lr, R[r].lr_mult);
        GRID_STRIDE(k, n) {
            int64_t i = off + k;
            float pv = p[i];
            float gv = inv != 1.0f ? __fmul_rn(grad[i], inv) : grad[i];
            float d = wd != 0.0f ? __fadd_rn(gv, __fmul_rn(wd, pv)) : gv;
            float b = fresh ? d : __fadd_rn(__fmul_rn(momentum, m[i]), d);
            m[i] = b;
            float step = nesterov ? __fadd_rn(d, __fmul_rn(momentum, b)) : b;
            p[i] = __fsub_rn(pv, __fmul_rn(lr, step));
        }
    }
}

/* torch's lerp (ATen's Lerp.h) in float. */
__device__ __forceinline__ float lerp_torch(float a, float b, float w) {
    return fabsf(w) < 0.5f ? __fadd_rn(a, __fmul_rn(w, __fsub_rn(b, a)))
                           : __fsub_rn(b, __fmul_rn(__fsub_rn(b, a), __fsub_rn(1.0f, w)));
}

/* AdamW (backend.h): m, v read as 0 at the first update (fresh); p's
 * update in double, rounded to float once, as the CPU's. k: the scalars
 * that do not depend on the step (vd_adamw_scalars_at's w1, beta2, c2,
 * eps); decay and neg_step are derived per range here with the IEEE
 * double operations vd_adamw_scalars_at performs on the host. */
__global__ void k_adamw(float *p, const float *grad, float *m, float *v, const vd_update_range *R,
                        int nr, const vd_step_scalars *S, vd_adamw_scalars k, float wd,
                        const vd_loss_scale *st) {
    if (st && st->found_inf) return;
    const float inv = st ? (float)(1.0 / (double)st->scale) : 1.0f;
    const bool fresh = S->t == 1;
    const float bc2_sqrt = S->bc2_sqrt;
    for (int r = 0; r < nr; r++) {
        const int64_t off = R[r].offset, n = R[r].count;
        const float lr = __fmul_rn(S->lr, R[r].lr_mult);
        const double decay = __dsub_rn(1.0, __dmul_rn((double)lr, (double)wd));
        const float neg_step = __double2float_rn(__ddiv_rn(-(double)lr, S->bc1));
        GRID_STRIDE(j, n) {
            int64_t i = off + j;
            float gv = inv != 1.0f ? __fmul_rn(grad[i], inv) : grad[i];
            float mv = lerp_torch(fresh ? 0.0f : m[i], gv, k.w1);
            float vv = __fadd_rn(__fmul_rn(fresh ? 0.0f : v[i], k.beta2),
                                 __fmul_rn(__fmul_rn(k.c2, gv), gv));
            m[i] = mv;
            v[i] = vv;
            float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vv), bc2_sqrt), k.eps);
            float u = __fdiv_rn(__fmul_rn(neg_step, mv), denom);
            p[i] = __double2float_rn(__dadd_rn(__dmul_rn((double)p[i], decay), (double)u));
        }
    }
}

int cuk_update(cudaStream_t s, int sm, const vd_optim_step *o, float *p, const float *g,
               float *m, float *v, const vd_update_range *R, int nr, int64_t total,
               const vd_step_scalars *S, const vd_loss_scale *st, vd_err *e) {
    if (nr <= 0 || total <= 0) return VD_OK;
    if (o->kind == VD_OPT_ADAMW) {
        vd_step_scalars none;
        memset(&none, 0, sizeof none);
        none.bc1 = 1.0;
        /* the step-independent fields (decay, neg_step, bc2_sqrt: the kernel's) */
        vd_adamw_scalars k = vd_adamw_scalars_at(o, 0.0f, &none);
        k_adamw<<<grid_for(total, sm), CU_THREADS, 0, s>>>(p, g, m, v, R, nr, S, k,
                                                            o->weight_decay, st);
    } else {
        k_sgd<<<grid_for(total, sm), CU_THREADS, 0, s>>>(p, g, m, R, nr, S, o->momentum,
                                                          o->weight_decay, o->nesterov, st);
    }
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
