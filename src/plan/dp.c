/* dp.c — data parallel: the gradient buckets of a plan and the all-reduce's
 * time on top of its simulation (plan.h, "data parallel"). Nothing here
 * changes a plan's steps, placement or simulation; vd_plan_dp only fills
 * p->dp. */
#include <stdlib.h>
#include "plan/plan_internal.h"

void vd_dp_layout_free(vd_dp_layout *l) {
    vd_free(l->buckets);
    vd_free(l->ranges);
    memset(l, 0, sizeof *l);
}

static int cmp_range(const void *a, const void *b) {
    const vd_dp_range *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int vd_dp_layout_build(const vd_net *net, const vd_plan *p, uint64_t bucket_bytes,
                       vd_dp_layout *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    if (!bucket_bytes) bucket_bytes = VD_DP_BUCKET_BYTES;
    size_t np = (size_t)(net->n_params ? net->n_params : 1);
    out->ranges = vd_calloc(np, sizeof *out->ranges, e);
    out->buckets = vd_calloc(np, sizeof *out->buckets, e);
    if (!out->ranges || !out->buckets) {
        vd_dp_layout_free(out);
        return VD_ENOMEM;
    }
    /* the last backward step with trained parameters closes the last bucket (frozen
     * ones have no gradient to average) */
    int last = -1;
    for (int s = 0; s < p->n_steps; s++) {
        const vd_step *st = &p->steps[s];
        if (st->kind != VD_STEP_BWD || p->layers[st->unit].chunk != 0) continue;
        const vd_layer *l = &net->layers[st->layer];
        for (int k = 0; k < l->n_params; k++)
            if (vd_param_trained(&net->params[l->param_first + k])) last = s;
    }
    int first = 0;              /* first range of the open bucket */
    uint64_t bytes = 0;
    for (int s = 0; s <= last; s++) {
        const vd_step *st = &p->steps[s];
        if (st->kind != VD_STEP_BWD || p->layers[st->unit].chunk != 0) continue;
        const vd_layer *l = &net->layers[st->layer];
        for (int k = 0; k < l->n_params; k++) {
            const vd_param *pr = &net->params[l->param_first + k];
            if (!vd_param_trained(pr)) continue;
            out->ranges[out->n_ranges++] = (vd_dp_range){ pr->offset, pr->numel };
            bytes += (uint64_t)pr->numel * 4u;
        }
        if (out->n_ranges == first || (bytes < bucket_bytes && s != last)) continue;
        /* close the bucket: its ranges sorted, adjacent ones merged */
        int n = out->n_ranges - first;
        vd_dp_range *r = out->ranges + first;
        qsort(r, (size_t)n, sizeof *r, cmp_range);
        int m = 0;
        for (int i = 1; i < n; i++) {
            if (r[m].offset + r[m].count == r[i].offset) r[m].count += r[i].count;
            else r[++m] = r[i];
        }
        out->n_ranges = first + m + 1;
        out->buckets[out->n_buckets++] = (vd_dp_bucket){ .step = s, .first_range = first,
                                                         .n_ranges = m + 1, .bytes = bytes };
        out->bytes += bytes;
        first = out->n_ranges;
        bytes = 0;
    }
    return VD_OK;
}

int vd_plan_dp(vd_plan *p, const vd_net *net, const vd_profile *prof, int ranks,
               uint64_t bucket_bytes, vd_err *e) {
    memset(&p->dp, 0, sizeof p->dp);
    if (ranks <= 1) return VD_OK;
    vd_dp_layout lay;
    int rc = vd_dp_layout_build(net, p, bucket_bytes, &lay, e);
    if (rc) return rc;
    struct vd_dp_sim *d = &p->dp;
    d->ranks = ranks;
    vd_device_allreduce(&prof->dev, &d->bw, &d->lat_s);
    d->n_buckets = lay.n_buckets;
    d->n_calls = lay.n_ranges;
    d->grad_bytes = lay.bytes;
    double ring = 2.0 * (double)(ranks - 1) / (double)ranks;
    double t = 0;               /* the communication stream is free from t */
    for (int b = 0; b < lay.n_buckets; b++) {
        const vd_dp_bucket *B = &lay.buckets[b];
        for (int k = B->first_range; k < B->first_range + B->n_ranges; k++) {
            double start = p->steps[B->step].t_end > t ? p->steps[B->step].t_end : t;
            double dur = d->lat_s + ring * (double)lay.ranges[k].count * 4.0 / d->bw;
            d->allreduce_s += dur;
            t = start + dur;
        }
    }
    double t_sgd = -1;
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == VD_STEP_SGD) t_sgd = p->steps[s].t_start;
    d->exposed_s = lay.n_buckets && t_sgd >= 0 && t > t_sgd ? t - t_sgd : 0;
    d->iter_s = p->sim.iter_s + d->exposed_s;
    vd_dp_layout_free(&lay);
    return VD_OK;
}
