/* plan_internal.h — functions shared between the plan/ sources. Not API. */
#ifndef VD_PLAN_INTERNAL_H
#define VD_PLAN_INTERNAL_H

#include "plan/plan.h"

#define VD_PLAN_ALIGN 256u

/* Assign offsets to intervals iv[0..n-1]: intervals overlapping in time get
 * disjoint [offset, offset+bytes). Intervals with pinned[i] true keep their
 * offset. Tries several orderings (first-fit decreasing by size, by start,
 * by size*duration) and keeps the lowest high-water mark. *hwm = max end. */
int vdp_place(vd_interval *iv, int n, const bool *pinned, uint64_t *hwm, vd_err *e);

/* Simulator core. ignore_waits: compute does not wait on copies (gives the
 * stall-free step times that the prefetch scheduler starts from).
 * d2h_done (optional, [n_tensors]): completion time of each tensor's offload. */
int vdp_simulate(vd_plan *p, const vd_profile *prof, bool ignore_waits, double *d2h_done,
                 vd_copy_span **copies, int *n_copies, vd_err *e);

/* Default aux bytes of layer i at batch (used by the analytic profile). */
uint64_t vdp_default_aux_bytes(const vd_net *net, int i, int batch);

#endif
