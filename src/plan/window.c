/* window.c — an exhaustive search over the dispositions of a window of
 * disposition keys (vdp_window_search): every keep / offload / recompute
 * assignment of the window's keys, the rest of the configuration (the other
 * keys' dispositions, the per-pass options, the split layers) as a given
 * plan has it, each assignment one full build (vdp_build_fixed, as the auto
 * search's configurations are built: the plans are real plans). A
 * measurement for issue 32 item 3 (is auto's gap to the lower bound the
 * search's or the bound's?), not part of the auto search: its cost is the
 * product of the keys' choices, 3^n builds at most. */
#include <math.h>
#include <string.h>
#include "plan/search.h"

/* The choices key k has in c, given its tensor T in the plan (refine's
 * rules, search_local.c: recompute needs an absent step and recomputable
 * writers, offload two absent steps). Returns their count. */
static int choices(const actx *c, int k, const vd_tensor *T, vd_disp *d) {
    int gap = T->bwd_first >= 0 && T->fwd_last >= 0 ? T->bwd_first - T->fwd_last - 1 : 0;
    int n = 0;
    d[n++] = VD_DISP_KEEP;
    if (gap >= 2) d[n++] = VD_DISP_OFFLOAD;
    if (gap >= 1 && c->can_rc[k]) d[n++] = VD_DISP_RECOMPUTE;
    return n;
}

int vdp_window_search(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                      const vd_plan *p, int top_key, int n, vdp_window *w, vd_plan *best,
                      vd_err *e) {
    memset(w, 0, sizeof *w);
    if (best) memset(best, 0, sizeof *best);
    w->base_s = w->best_s = INFINITY;
    if (n < 1 || n > VDP_WINDOW_MAX)
        return vd_errf(e, VD_EUSAGE, "a window of %d keys (1 to %d)", n, VDP_WINDOW_MAX);
    int L = net->n_layers;
    int *chunks = vd_calloc((size_t)L, sizeof *chunks, NULL);
    if (!chunks) return vd_errf(e, VD_ENOMEM, "out of memory");
    vd_plan_opts o = *opts;
    o.policy = VD_POLICY_AUTO;
    if (p->n_units != p->n_layers) {   /* split as p is */
        for (int i = 0; i < L; i++) chunks[i] = p->layers[p->first_unit[i]].n_chunks;
        o.chunks = chunks;
    }
    vdp_search s = {0};
    actx c;
    int rc = search_ctx_init(&c, &s, net, prof, &o, VDP_SEARCH, e);
    if (rc) { vd_free(chunks); return rc; }
    search_config_from_plan(&c, p);
    vd_disp alt[VDP_WINDOW_MAX][3];
    int n_alt[VDP_WINDOW_MAX], pos[VDP_WINDOW_MAX];
    for (int k = top_key < L ? top_key : L; k >= 0 && w->n_keys < n; k--) {
        int t = c.fixed[k] ? -1 : tensor_of(&c, p, k);
        if (t < 0) continue;
        int j = w->n_keys;
        n_alt[j] = choices(&c, k, &p->tensors[t], alt[j]);
        if (n_alt[j] < 2) continue;
        w->keys[j] = k;
        w->base[j] = c.disp[k];
        w->n_keys++;
    }
    memset(pos, 0, sizeof pos);
    for (;;) {
        for (int j = 0; j < w->n_keys; j++) c.disp[w->keys[j]] = alt[j][pos[j]];
        vd_plan Q;
        vd_err te = {0};
        rc = vdp_build_fixed(net, prof, &c.o, VD_POLICY_AUTO, c.algos, NULL, &Q, &te);
        if (rc != VD_OK && rc != VD_EBUDGET) { *e = te; break; }
        w->builds++;
        bool base = true, kept = false;
        for (int j = 0; j < w->n_keys; j++) base &= alt[j][pos[j]] == w->base[j];
        if (rc == VD_OK) {
            w->fits++;
            if (base) w->base_s = Q.sim.iter_s;
            if (Q.sim.iter_s < w->best_s) {
                w->best_s = Q.sim.iter_s;
                for (int j = 0; j < w->n_keys; j++) w->best[j] = alt[j][pos[j]];
                if (best) {
                    vdp_plan_release(best);
                    *best = Q;
                    kept = true;
                }
            }
        }
        if (!kept) vdp_plan_release(&Q);
        rc = VD_OK;
        int j = 0;   /* the next assignment: mixed radix, key 0 fastest */
        while (j < w->n_keys && ++pos[j] == n_alt[j]) pos[j++] = 0;
        if (j == w->n_keys) break;
    }
    search_ctx_free(&c);
    vd_free(chunks);
    if (rc && best) vdp_plan_release(best);
    return rc;
}
