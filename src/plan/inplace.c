/* inplace.c — which layers run in place (their output overwrites their
 * input). */
#include <stdlib.h>
#include "plan/plan_internal.h"

int vdp_n_consumers(const vd_net *net, int src) {
    int n = 0;
    for (int j = 0; j < net->n_layers; j++)
        for (int k = 0; k < net->layers[j].n_in; k++)
            if (net->layers[j].in[k] == src) n++;
    return n;
}

int vdp_add_inplace_input(const vd_net *net, int i) {
    const vd_layer *l = &net->layers[i];
    if (l->op != VD_OP_ADD) return -1;
    int best = -1;
    for (int k = 0; k < l->n_in; k++) {
        int src = l->in[k];
        if (src < 0 || (best >= 0 && src <= l->in[best])) continue;
        bool ok = true;
        for (int m = 0; m < l->n_in && ok; m++) ok = m == k || l->in[m] != src;
        for (int j = i + 1; j < net->n_layers && ok; j++)
            for (int m = 0; m < net->layers[j].n_in && ok; m++) ok = net->layers[j].in[m] != src;
        if (ok) best = k;
    }
    return best;
}

void vd_schedule_inplace_flags(const vd_net *net, bool *inplace) {
    /* consumers of each layer's output, counted in one pass (every build of
     * the auto search comes here: a count per layer was 3% of it); without
     * the memory, counted per layer */
    int *n_cons = vd_calloc((size_t)net->n_layers + 1, sizeof *n_cons, NULL);
    for (int j = 0; n_cons && j < net->n_layers; j++)
        for (int k = 0; k < net->layers[j].n_in; k++)
            if (net->layers[j].in[k] >= 0 && net->layers[j].in[k] < net->n_layers) n_cons[net->layers[j].in[k]]++;
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        bool rx, ry;
        vd_op_bwd_reads(net, i, &rx, &ry);
        inplace[i] = false;
        if (!vd_op_table[l->op].can_inplace || rx || l->n_in != 1) continue;
        int src = l->in[0];
        if (src < 0) continue;                        /* never overwrite the net input */
        if ((n_cons ? n_cons[src] : vdp_n_consumers(net, src)) != 1) continue;
        /* The producer's output is overwritten: its backward must not read it
         * (for an in-place producer, "its output" is the same region: the
         * chain's earlier members' backward must not need their y either). */
        int p = src;
        bool ok = true;
        for (;;) {
            bool px, py;
            vd_op_bwd_reads(net, p, &px, &py);
            if (py) { ok = false; break; }
            if (!inplace[p]) break;
            p = net->layers[p].in[0];
        }
        inplace[i] = ok;
    }
    vd_free(n_cons);
}

void vd_schedule_inplace(vd_net *net) {
    bool *f = vd_calloc((size_t)(net->n_layers > 0 ? net->n_layers : 1), sizeof *f, NULL);
    if (!f) return;  /* flags stay as they were; the plan never depends on them */
    vd_schedule_inplace_flags(net, f);
    for (int i = 0; i < net->n_layers; i++) net->layers[i].inplace = f[i];
    vd_free(f);
}
