/* lr.c — learning-rate policies; formulas in lr.h. */
#include <math.h>
#include "train/lr.h"

double vd_lr_at(const vd_lr_policy *p, double lr, int64_t iter, int64_t max_iter) {
    double v = lr;
    double frac = max_iter > 0 ? (double)iter / (double)max_iter : 0.0;
    if (frac > 1.0) frac = 1.0;
    switch (p->type) {
    case VD_LR_FIXED:
        break;
    case VD_LR_STEP:
        if (p->step > 0) v = lr * pow((double)p->gamma, (double)(iter / p->step));
        break;
    case VD_LR_MULTISTEP: {
        int k = 0;
        for (int i = 0; i < p->n_milestones; i++)
            if (iter >= p->milestones[i]) k++;
        v = lr * pow((double)p->gamma, (double)k);
        break;
    }
    case VD_LR_POLY:
        v = lr * pow(1.0 - frac, (double)p->power);
        break;
    case VD_LR_COSINE:
        v = (double)p->min_lr + (lr - (double)p->min_lr) * (1.0 + cos(M_PI * frac)) / 2.0;
        break;
    }
    if (p->warmup > 0 && iter < p->warmup)
        v *= (double)(iter + 1) / (double)p->warmup;
    return v;
}

int vd_lr_validate(const vd_lr_policy *p, double lr, vd_err *e) {
    if (!(lr > 0) || !isfinite(lr))
        return vd_errf(e, VD_EUSAGE, "learning rate must be a positive number (got %g)", lr);
    if (p->warmup < 0)
        return vd_errf(e, VD_EUSAGE, "lr_policy warmup must be >= 0 (got %lld)",
                       (long long)p->warmup);
    switch (p->type) {
    case VD_LR_FIXED:
        return VD_OK;
    case VD_LR_STEP:
        if (p->step <= 0)
            return vd_errf(e, VD_EUSAGE, "lr_policy step: 'step' must be > 0 (got %lld)",
                           (long long)p->step);
        if (!(p->gamma > 0))
            return vd_errf(e, VD_EUSAGE, "lr_policy step: 'gamma' must be > 0 (got %g)",
                           (double)p->gamma);
        return VD_OK;
    case VD_LR_MULTISTEP:
        if (p->n_milestones < 1 || p->n_milestones > 16)
            return vd_errf(e, VD_EUSAGE, "lr_policy multistep needs 1..16 milestones (got %d)",
                           p->n_milestones);
        for (int i = 0; i < p->n_milestones; i++)
            if (p->milestones[i] < 0 || (i && p->milestones[i] <= p->milestones[i - 1]))
                return vd_errf(e, VD_EUSAGE, "lr_policy multistep: milestones must be "
                               "non-negative and increasing (milestone %d is %lld)", i,
                               (long long)p->milestones[i]);
        if (!(p->gamma > 0))
            return vd_errf(e, VD_EUSAGE, "lr_policy multistep: 'gamma' must be > 0 (got %g)",
                           (double)p->gamma);
        return VD_OK;
    case VD_LR_POLY:
        if (!(p->power >= 0))
            return vd_errf(e, VD_EUSAGE, "lr_policy poly: 'power' must be >= 0 (got %g)",
                           (double)p->power);
        return VD_OK;
    case VD_LR_COSINE:
        if (!(p->min_lr >= 0) || (double)p->min_lr > lr)
            return vd_errf(e, VD_EUSAGE, "lr_policy cosine: 'min_lr' must be in [0, lr] "
                           "(got %g, lr %g)", (double)p->min_lr, lr);
        return VD_OK;
    }
    return vd_errf(e, VD_EUSAGE, "unknown lr_policy type %d", (int)p->type);
}

const char *vd_lr_policy_name(const vd_lr_policy *p) {
    switch (p->type) {
    case VD_LR_FIXED: return "fixed";
    case VD_LR_STEP: return "step";
    case VD_LR_MULTISTEP: return "multistep";
    case VD_LR_POLY: return "poly";
    case VD_LR_COSINE: return "cosine";
    }
    return "?";
}
