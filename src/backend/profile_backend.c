/* profile_backend.c — a profile whose algorithm options are a backend's:
 * the analytic times (profile/profile.h), the backend's options and
 * saved-state bytes. */
#include <stdio.h>
#include <string.h>
#include "backend/backend.h"

int vd_profile_backend(const vd_net *net, int batch, vd_backend *be,
                       const vd_device_params *dev, vd_profile *out, vd_err *e) {
    int rc = vd_profile_analytic(net, batch, dev, out, e);
    if (rc) return rc;
    snprintf(out->source, sizeof out->source, "analytic:%s+%s", dev->name, be->name);
    for (int i = 0; i < net->n_layers; i++) {
        vd_profile_layer *pl = &out->layers[i];
        /* the analytic times of the layer's first option */
        double fwd_s = pl->algos[0].fwd_s, bwd_s = pl->algos[0].bwd_s;
        pl->aux_bytes = be->layer_aux_bytes(net, i, batch);
        const vd_algo_opt *opts = NULL;
        int n = 0;
        rc = be->layer_algos(be, i, &opts, &n, e);
        if (rc) { vd_profile_free(out); return rc; }
        if (n <= 0 || n > VD_PROFILE_MAX_ALGOS) {
            vd_profile_free(out);
            return vd_errf(e, VD_EINTERNAL, "backend %s offers %d algorithms for layer '%s'",
                           be->name, n, net->layers[i].name);
        }
        memset(pl->algos, 0, sizeof pl->algos);
        pl->n_algos = n;
        for (int k = 0; k < n; k++) {
            vd_profile_algo *a = &pl->algos[k];
            snprintf(a->label, sizeof a->label, "%s", opts[k].label);
            double scale = k == 0 ? 1.0 : 1.6;
            a->fwd_s = fwd_s * scale;
            a->bwd_s = bwd_s * scale;
            a->fwd_workspace = vd_algo_ws(&opts[k], false);
            a->bwd_workspace = vd_algo_ws(&opts[k], true);
            a->workspace = a->fwd_workspace > a->bwd_workspace ? a->fwd_workspace : a->bwd_workspace;
            a->fwd_algo = opts[k].fwd_algo;
            a->bwd_data_algo = opts[k].bwd_data_algo;
            a->bwd_filter_algo = opts[k].bwd_filter_algo;
        }
    }
    return VD_OK;
}
