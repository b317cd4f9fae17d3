/* tensors.c — a build's tensors: activations, gradients (shared through adds
 * and in-place ReLUs where safe), saved state, workspaces, and when each is
 * read and written (liveness). */
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include "plan/builder.h"

int vdp_add_tensor(bld *b, vd_tensor_kind kind, int unit, uint64_t bytes,
                      const char *name, const char *suffix) {
    vd_plan *p = b->p;
    int t = p->n_tensors++;
    vd_tensor *T = &p->tensors[t];
    /* everything but the name, which vdp_name_tensors writes (a build of
     * the auto search clears and names about a thousand tensors, most of
     * them in builds dropped unread) */
    memset((char *)T + offsetof(vd_tensor, kind), 0, sizeof *T - offsetof(vd_tensor, kind));
    T->name[0] = '\0';
    b->tname[2 * t] = name;
    b->tname[2 * t + 1] = suffix;
    T->kind = kind;
    T->unit = unit;
    T->layer = unit >= 0 ? p->layers[unit].layer : -1;
    T->bytes = bytes;
    T->prod_step = -1;
    T->fwd_last = T->bwd_first = T->bwd_last = -1;
    T->offload_step = T->release_step = T->prefetch_step = -1;
    T->ev_compute = T->ev_d2h = -1;
    T->rd_before = T->rd_after = -1;
    T->iv[0] = T->iv[1] = -1;
    T->recompute_step = -1;
    b->fwd_write[t] = -1;
    b->first_touch[t] = INT32_MAX;
    b->last_touch[t] = -1;
    return t;
}

void vdp_name_tensors(bld *b, int first) {
    vd_plan *p = b->p;
    for (int u = 0; u < p->n_units && first == 0; u++) {
        vd_plan_layer *pl = &p->layers[u];
        const vd_profile_layer *pr = &b->prof->layers[pl->layer];
        vdp_copy_str(pl->algo_label, sizeof pl->algo_label, pr->algos[pl->algo_fwd].label);
        vdp_copy_str(pl->algo_bwd_label, sizeof pl->algo_bwd_label, pr->algos[pl->algo_bwd].label);
    }
    for (int t = first; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        const char *name = b->tname[2 * t], *suffix = b->tname[2 * t + 1];
        /* name + suffix, truncated like snprintf (without its formatting cost);
         * a chunk's own tensor: name#chunk + suffix ("features.2#3:y") */
        char cn[VD_NAME_MAX + 16];
        const vd_plan_layer *pl = T->unit >= 0 ? &p->layers[T->unit] : NULL;
        if (pl && pl->n_chunks > 1 && T->kind != VD_T_GRADS && T->samples != p->batch) {
            snprintf(cn, sizeof cn, "%s#%d", name, pl->chunk);
            name = cn;
        }
        size_t cap = sizeof T->name - 1, n = strlen(name), ns = suffix ? strlen(suffix) : 0;
        if (n > cap) n = cap;
        if (ns > cap - n) ns = cap - n;
        memcpy(T->name, name, n);
        if (ns) memcpy(T->name + n, suffix, ns);
        T->name[n + ns] = '\0';
    }
}

void vdp_touch(bld *b, int t, int s) {
    if (t < 0) return;
    if (s < b->first_touch[t]) b->first_touch[t] = s;
    if (s > b->last_touch[t]) b->last_touch[t] = s;
}

/* Record a read of t at step s. */
void vdp_rd(bld *b, int t, int s) {
    if (t < 0) return;
    vd_tensor *T = &b->p->tensors[t];
    vdp_touch(b, t, s);
    if (s < b->L) {
        if (s > T->fwd_last) T->fwd_last = s;
    } else if (s < 2 * b->L) {
        if (T->bwd_first < 0 || s < T->bwd_first) T->bwd_first = s;
        if (s > T->bwd_last) T->bwd_last = s;
    }
}

static void wr(bld *b, int t, int s) {
    if (t < 0) return;
    vdp_touch(b, t, s);
    if (s < b->L && s > b->fwd_write[t]) b->fwd_write[t] = s;
}

static uint64_t act_bytes(const vd_net *net, int i, int batch) {
    return (uint64_t)batch * (uint64_t)vd_net_out_numel(net, i) * vd_math_act_bytes(net->train.math);
}

/* Does unit u's output (or output gradient) live as its chunk's own tensor:
 * a split layer before its run's last? */
static bool chunk_own(const bld *b, int u) {
    int l = b->p->layers[u].layer;
    return b->p->layers[u].n_chunks > 1 && l < b->run_b[l];
}

/* Is unit u's input from the unit before it in its run (u - 1, the same
 * chunk), not the whole batch's tensor? */
static bool chunk_input(const bld *b, int u) {
    int l = b->p->layers[u].layer;
    return b->p->layers[u].n_chunks > 1 && l > b->run_a[l];
}

/* A feature map tensor of unit u (or of x: u -1) holding n samples. */
static int add_map(bld *b, vd_tensor_kind kind, int u, int n, const char *name, const char *sfx) {
    int l = u >= 0 ? b->p->layers[u].layer : -1;
    int t = vdp_add_tensor(b, kind, u, act_bytes(b->net, l, n), name, sfx);
    b->p->tensors[t].samples = n;
    return t;
}

/* ---- gradient aliasing through adds and in-place ReLUs ------------------ */

/* An add passes its output gradient dy unchanged to every input, and its
 * backward used to copy it (beta 0) or add it (beta 1) into each input's own
 * gradient tensor. When add a is the first backward writer of the gradient of
 * its input src (a is src's highest consumer, src appears once among a's
 * inputs, same size), that gradient can BE a's dy tensor: a writes nothing for
 * the input (dx[k] = -1) and src's other consumers accumulate (beta 1) into
 * the shared tensor after a has read it, as they did into the copy. Same
 * sums in the same order: the bytes are those of the copy.
 *
 * An in-place ReLU r (vd_layer.inplace: its input src has no other consumer,
 * so r writes src's whole gradient, beta 0) whose backward runs in place
 * (vd_op_info.bwd_inplace) can likewise take its dy tensor as src's
 * gradient: r writes dx into the tensor it reads as dy. The same values (the
 * op reads each element before it writes it), one feature map less in r's
 * backward step. Unlike an add, r changes what the tensor holds: from r's
 * gradient to src's. Taken only where src's backward can take r's
 * (vd_op_info.bwd_takes_relu: a batch norm; the backends ask
 * vd_op_relu_taker), which is what it is for: a backend that
 * fuses the two leaves r's backward out and src reads r's gradient, masking
 * it itself (backend.h, vd_op_io.relu_mask); the tensor then still holds r's
 * gradient when src reads it, which rule 2 below makes the last read.
 * Likewise where a max pool after r takes r's backward (pool_takes_relu)
 * or the batch norm before the add that r reads does (bn_takes_add_relu:
 * the batch norm rewrites the tensor as r would have, two steps later; the
 * add between them reads nothing it writes).
 * Elsewhere the sharing would save a map where a step holds both, but
 * changes which plans the search finds for no time saved
 * (docs/results/2026-12-06-s19/relu-bwd.md).
 *
 * The aliased gradients of one physical tensor form a tree: its root owns
 * the tensor (a layer whose gradient is not aliased), the children of an add
 * are its aliased inputs, a ReLU's child its input (par[child] = the add or
 * ReLU). Every node w reads the tensor as dy at its backward step and must
 * find exactly its own gradient there: the root's, then the contributions of
 * the other consumers of each node on the path from the root down to w, and
 * the rewrites of the ReLUs on it, in backward order. Those come in that
 * order and before w's read by construction: the other consumers of a node y
 * lie between y and par[y] in layer order (above y: they consume it; below
 * par[y]: the add writes y's gradient first), so they run after par[y] and
 * y's other ancestors have read, and before y and its descendants read; a
 * ReLU rewrites before its child reads. What can go wrong:
 *  1. a node x that is neither w nor an ancestor of w (w's gradient holds
 *     none of x's contributions) with another consumer that runs before w
 *     reads (above w). So: for every such pair, every other consumer of x is
 *     below w. It also keeps a layer from reading the shared tensor as dy
 *     while it writes it as dx (a consumer of x equal to w), and covers
 *     chains of adds, an add's input that the add's other branch consumes
 *     too, and sibling inputs with other consumers;
 *  2. a ReLU r with a child, and a node w below r (it reads after r's
 *     rewrite) that is not in r's subtree (an add's other input below r):
 *     forbidden.
 * The candidates are taken in backward order (adds and ReLUs from the last
 * layer down, inputs in order); each is kept only if its whole tree still
 * obeys both rules. A candidate is a leaf when it joins (its own children
 * are candidates of a lower layer, taken later) and changes no other node's
 * ancestors: only the pairs that involve it are new (alias_leaf_ok).
 *
 * par[L] receives the add or ReLU whose dy tensor is layer v's gradient (-1:
 * v has its own tensor, or none). */
static int tree_root(const int *par, int v) {
    while (par[v] >= 0) v = par[v];
    return v;
}

/* May leaf s (par[s] set) stay in the tree rooted at r, which obeyed the
 * rules without it? oth[x]: x's highest consumer other than its first writer
 * (-1 none); lo: the tree's lowest member but s; in, kid, sub: scratch [L].
 * The members are found in one pass down from r to lo (par[v] > v: they are
 * at or below r, and v is one iff its parent is, at most r), not by a walk
 * to the root from every layer or a pass down to layer 0 (the ReLUs after
 * ResNet's adds join the trees: a stage is one chain; plantime.md of
 * docs/results/2026-12-06-s21 has the profiles). in[v]: 2 for s and its
 * ancestors, 1 for the other members;
 * kid[v]: v has a child in the tree; sub[v] (where s's parent q rewrites,
 * for v <= q): v is in q's subtree, found the same way. */
static bool alias_leaf_ok(const vd_net *net, const int *par, const int *oth, int r, int s,
                          int lo, int *in, int *kid, int *sub) {
    if (s < lo) lo = s;
    for (int v = r; v >= lo; v--) {
        in[v] = v == r || (par[v] >= 0 && par[v] <= r && in[par[v]]);
        kid[v] = 0;
    }
    for (int v = r; v >= lo; v--)
        if (in[v] && v != r) kid[par[v]] = 1;
    for (int v = s; v >= 0; v = par[v]) in[v] = 2;
    int q = par[s];
    bool q_rewrites = !vd_op_table[net->layers[q].op].bwd_is_dy;
    if (q_rewrites)
        for (int v = q; v >= lo; v--) sub[v] = v == q || (par[v] >= 0 && par[v] <= q && sub[par[v]]);
    for (int w = r; w >= lo; w--) {
        if (!in[w] || w == s) continue;
        /* rule 1, x = s: every other member is outside s's subtree (a leaf) */
        if (oth[s] >= w) return false;
        if (in[w] == 2) continue;   /* an ancestor of s: the rest concern others */
        /* rule 1, w = s: a member x that is not s's ancestor */
        if (w != r && oth[w] >= s) return false;
        /* rule 2, w = s: a rewriting ReLU above s that is not its ancestor */
        if (kid[w] && w > s && !vd_op_table[net->layers[w].op].bwd_is_dy) return false;
        /* rule 2, r = q (a ReLU whose child s is new): below it only its subtree */
        if (q_rewrites && w < q && !sub[w]) return false;
    }
    return true;
}

/* Does the max pool after in-place ReLU a take a's backward (vd_op_pool_relu,
 * vd_plan_layer.takes_relu)? Then a's input shares a's dy tensor as for a
 * batch norm: the pool is a's gradient's only writer (fw, oth of
 * alias_grads), both run whole, the pool's unit right after a's. */
static bool pool_takes_relu(const bld *b, const vd_net *net, int a, const int *fw,
                            const int *oth) {
    const vd_plan *p = b->p;
    int q = fw[a];
    if (q < 0 || oth[a] >= 0 || vd_op_pool_relu(net, q) != a) return false;
    int ua = p->first_unit[a], uq = p->first_unit[q];
    return uq == ua + 1 && p->layers[ua].n_chunks == 1 && p->layers[uq].n_chunks == 1;
}

/* Does the batch norm before the add that in-place ReLU a reads take a's
 * backward (vd_op_add_relu, vd_plan_layer.takes_add_relu)? Then the add's
 * input gradient shares a's dy tensor as for a max pool: the three run
 * whole (alias_grads asks a's first writer and other readers). */
static bool bn_takes_add_relu(const bld *b, int a) {
    const vd_plan *p = b->p;
    if (a < 2 || b->add_relu[a - 2] != a) return false;
    for (int i = a - 2; i <= a; i++)
        if (p->layers[p->first_unit[i]].n_chunks != 1) return false;
    return true;
}

static int alias_grads(const bld *b, const vd_net *net, int loss, int batch, int *par,
                       vd_err *e) {
    int L = net->n_layers;
    const vd_plan *p = b->p;
    for (int v = 0; v < L; v++) par[v] = -1;
    int *fw = vd_malloc((size_t)(L > 0 ? L : 1) * 8 * sizeof *fw, NULL);
    if (!fw) return vd_errf(e, VD_ENOMEM, "out of memory");
    int *fwk = fw + L, *oth = fw + 2 * L, *in = fw + 3 * L, *cand = fw + 4 * L, *kid = fw + 5 * L;
    int *sub = fw + 6 * L, *lo = fw + 7 * L;   /* lo[root]: its tree's lowest member */
    for (int v = 0; v < L; v++) lo[v] = v;
    for (int v = 0; v < L; v++) fw[v] = fwk[v] = oth[v] = -1;
    /* first writer (layer, input) of each gradient, backward order */
    for (int i = L - 1; i >= 0; i--)
        for (int k = 0; k < net->layers[i].n_in; k++) {
            int src = net->layers[i].in[k];
            if (src >= 0 && fw[src] < 0) { fw[src] = i; fwk[src] = k; }
        }
    for (int i = 0; i < L; i++)
        for (int k = 0; k < net->layers[i].n_in; k++) {
            int src = net->layers[i].in[k];
            if (src >= 0 && i != fw[src] && i > oth[src]) oth[src] = i;
        }
    int nc = 0;   /* each gradient has one first writer: at most L candidates */
    for (int a = L - 1; a >= 0; a--) {
        const vd_layer *l = &net->layers[a];
        const vd_plan_layer *pa = &p->layers[p->first_unit[a]];
        /* (a split layer's output gradient is its chunks' own inside its run) */
        if (a == loss || l->no_grad || pa->n_chunks > 1) continue;
        if (vd_op_table[l->op].bwd_inplace && pa->inplace) {
            /* the ReLU's input gradient is its dx alone (no other writer,
             * beta 0), and the whole batch's tensor (not its chunk's) */
            int src = l->in[0];
            if (src >= 0 && (vd_op_table[net->layers[src].op].bwd_takes_relu ||
                             pool_takes_relu(b, net, a, fw, oth) || bn_takes_add_relu(b, a)) &&
                !net->layers[src].no_grad && fw[src] == a && oth[src] < 0 &&
                !chunk_own(b, p->first_unit[src]))
                cand[nc++] = src;
            continue;
        }
        if (!vd_op_table[l->op].bwd_is_dy) continue;
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in[k];
            /* (an input that needs no gradient has none to share) */
            if (src < 0 || net->layers[src].no_grad || fw[src] != a || fwk[src] != k) continue;
            bool dup = false;
            for (int j = 0; j < l->n_in; j++) dup |= j != k && l->in[j] == src;
            if (dup || act_bytes(net, src, batch) != act_bytes(net, a, batch)) continue;
            cand[nc++] = src;
        }
    }
    /* (a candidate joins as a leaf: its own tree is itself, low[src] = src) */
    for (int c = 0; c < nc; c++) {
        int src = cand[c];
        par[src] = fw[src];
        int r = tree_root(par, src);
        if (!alias_leaf_ok(net, par, oth, r, src, lo[r], in, kid, sub)) par[src] = -1;
        else if (src < lo[r]) lo[r] = src;
    }
    vd_free(fw);
    return VD_OK;
}

/* The persistent tensors (parameters, the optimizer's state, gradients), x
 * and labels. The state: SGD's momentum ("momentum", the parameters' bytes;
 * kept with momentum 0 too, where the update writes the gradient into it),
 * AdamW's exp_avg and exp_avg_sq ("adamw_state", twice the parameters').
 * A forward-only plan has the state only as an evaluation plan, whose
 * placement must leave its training plan's state where it is (b->pin); an
 * inference plan has none. */
static void fixed_tensors(bld *b) {
    const vd_net *net = b->net;
    vd_plan *p = b->p;
    int batch = p->batch;
    bool fo = p->forward_only;
    uint64_t pbytes = (uint64_t)net->param_floats * 4u;
    bool adamw = net->train.optimizer == VD_OPT_ADAMW;

    p->t_params = vdp_add_tensor(b, VD_T_PARAMS, -1, pbytes, "params", NULL);
    p->t_mom = fo && !b->pin ? -1
             : vdp_add_tensor(b, VD_T_OPTIM, -1, (uint64_t)vd_net_state_floats(net) * 4u,
                              adamw ? "adamw_state" : "momentum", NULL);
    p->update_in_bwd = !fo && !vd_plan_grads_array(net, b->opts);
    p->t_grads = fo || p->update_in_bwd ? -1
               : vdp_add_tensor(b, VD_T_GRADS, -1, pbytes, "grads", NULL);
    p->t_x = add_map(b, VD_T_INPUT, -1, batch, "x", NULL);
    p->t_labels = vdp_add_tensor(b, VD_T_LABELS, -1, (uint64_t)batch * 4u, "labels", NULL);
    int persist[3] = {p->t_params, p->t_mom, p->t_grads};
    for (int k = 0; k < 3; k++) {
        if (persist[k] < 0) continue;
        p->tensors[persist[k]].persistent = true;
        vdp_touch(b, persist[k], 0);
        vdp_touch(b, persist[k], p->n_steps - 1);
    }
}

/* Parameter floats of layer i's span of the parameter array (its
 * gradients' layout); *base: where it starts. 0 for a layer without trained
 * parameters (vd_param_trained): its backward writes no parameter gradient. */
static int64_t dw_span(const vd_net *net, int i, int64_t *base) {
    const vd_layer *l = &net->layers[i];
    bool trained = false;
    for (int k = l->param_first; k < l->param_first + l->n_params; k++)
        trained |= vd_param_trained(&net->params[k]);
    if (!trained) { *base = 0; return 0; }
    const vd_param *f = &net->params[l->param_first];
    const vd_param *z = &net->params[l->param_first + l->n_params - 1];
    *base = f->offset;
    return z->offset + z->numel - f->offset;
}

/* The update in the backward pass (vd_plan.update_in_bwd): each layer's
 * parameter gradients, laid out as its span of the parameter array. The
 * DW_OWN layers with the largest spans get a tensor of their own, live in
 * their backward step only (VGG-16's classifier: 0.46 GiB); the others share
 * one, live through the backward pass and sized to the largest of them (a
 * tensor per layer made every build of ResNet-50 dearer to place, 107 more
 * tensors, and its search, capped by effort, reached worse plans). */
enum { DW_OWN = 8 };
static void dw_tensors(bld *b) {
    const vd_net *net = b->net;
    vd_plan *p = b->p;
    int own[DW_OWN], n_own = 0;
    for (int i = 0; i < b->NL; i++) {   /* the DW_OWN largest spans, largest first */
        int64_t base, sp = dw_span(net, i, &base);
        if (sp <= 0) continue;
        int at = n_own;
        while (at > 0 && dw_span(net, own[at - 1], &base) < sp) at--;
        if (at >= DW_OWN) continue;
        if (n_own < DW_OWN) n_own++;
        for (int k = n_own - 1; k > at; k--) own[k] = own[k - 1];
        own[at] = i;
    }
    /* A split layer's gradients add up over its chunks, whose backwards
     * interleave with its run's other layers': a tensor of its own too. Its
     * later chunks come after its first unit (chunk 0), which makes it. */
    int64_t shared = 0;
    for (int u = 0; u < b->L; u++) {
        vd_plan_layer *pl = &p->layers[u];
        int i = pl->layer;
        int64_t base, sp = dw_span(net, i, &base);
        if (sp <= 0) continue;
        pl->dw_base = base;
        if (p->first_unit[i] != u) { pl->dw = p->layers[p->first_unit[i]].dw; continue; }
        bool mine = pl->n_chunks > 1;
        for (int k = 0; k < n_own; k++) mine |= own[k] == i;
        if (mine) pl->dw = vdp_add_tensor(b, VD_T_GRADS, u, (uint64_t)sp * 4u, net->layers[i].name, ":dw");
        else if (sp > shared) shared = sp;
    }
    if (!shared) return;
    int t = vdp_add_tensor(b, VD_T_GRADS, -1, (uint64_t)shared * 4u, "dw", NULL);
    for (int u = 0; u < b->L; u++) {
        int64_t base;
        if (p->layers[u].dw < 0 && dw_span(net, p->layers[u].layer, &base) > 0) p->layers[u].dw = t;
    }
}

/* ---- the batch norm + add fusion (vd_plan_opts.fuse_bn_add) ------------ */

/* Does batch norm unit u run folded into the add that reads its output
 * (vd_op_bn_folder): a training plan with the fusion on, the batch norm and
 * the add both whole? The batch norm then runs "in place" for the plan: its
 * output tensor is its input's, which it never writes (it computes its
 * statistics alone); the add reads x there and normalises it. Nothing
 * reads the batch norm's output but the add (no backward either: the batch
 * norm's own reads x), so no map of it is ever stored. */
static bool bn_folded(const bld *b, int u) {
    const vd_plan *p = b->p;
    const vd_plan_layer *pl = &p->layers[u];
    if (p->forward_only || !b->opts->fuse_bn_add || pl->n_chunks > 1 ||
        b->net->layers[pl->layer].op != VD_OP_BATCHNORM)
        return false;
    int a = b->bn_fold[pl->layer];   /* vd_op_bn_folder */
    return a >= 0 && p->layers[p->first_unit[a]].n_chunks == 1;
}

/* The unit of the batch norm that add unit u applies (vd_plan_layer.bn_unit),
 * or -1. */
static int bn_fold_unit(const bld *b, int u) {
    const vd_plan *p = b->p;
    if (p->forward_only || !b->opts->fuse_bn_add ||
        b->net->layers[p->layers[u].layer].op != VD_OP_ADD)
        return -1;
    int bn = b->bn_fold[p->layers[u].layer];   /* vd_op_bn_folded */
    if (bn < 0 || p->layers[u].n_chunks > 1) return -1;
    return bn_folded(b, p->first_unit[bn]) ? p->first_unit[bn] : -1;
}

/* Liveness of the fusion: the add reads the batch norm's statistics (aux)
 * at its forward step (its x and parameters: in_t, persistent). */
static void bn_fold_liveness(bld *b) {
    const vd_plan *p = b->p;
    for (int u = 0; u < b->L; u++)
        if (p->layers[u].bn_unit >= 0) vdp_rd(b, p->layers[p->layers[u].bn_unit].aux, u);
}

/* Per unit: its output (unless in place, or a later chunk of a run's last
 * layer: the whole batch's tensor, made by chunk 0), saved state and
 * workspaces with the options algos[2 n_layers]. */
static void layer_tensors(bld *b, const int *algos) {
    const vd_net *net = b->net;
    vd_plan *p = b->p;
    int batch = p->batch;
    bool fo = p->forward_only;
    for (int u = 0; u < b->L; u++) {
        vd_plan_layer *pl = &p->layers[u];
        int i = pl->layer;
        const vd_layer *l = &net->layers[i];
        pl->inplace = l->n_in == 1 && b->extra[u];  /* extra holds inplace flags here */
        if (bn_folded(b, u)) pl->inplace = true;    /* (its output: its input's tensor) */
        pl->bn_unit = bn_fold_unit(b, u);
        /* a forward-only plan's whole-batch add over an input that nobody
         * reads after it (vdp_add_inplace_input): one map less at its step */
        int ka = fo && pl->n_chunks == 1 ? vdp_add_inplace_input(net, i) : -1;
        if (ka >= 0 && b->lact[l->in[ka]] >= 0) {
            pl->inplace = true;
            b->act_of[u] = b->lact[l->in[ka]];
        } else if (pl->inplace)
            b->act_of[u] = chunk_input(b, u) ? b->act_of[u - 1] : b->lact[l->in[0]];
        else if (pl->chunk > 0 && !chunk_own(b, u))
            b->act_of[u] = b->lact[i];
        else
            b->act_of[u] = add_map(b, VD_T_ACT, u, chunk_own(b, u) ? pl->n : batch, l->name, ":y");
        if (pl->chunk == 0) b->lact[i] = chunk_own(b, u) ? -1 : b->act_of[u];
        pl->y = b->act_of[u];
        for (int k = 0; k < l->n_in; k++)
            pl->in_t[k] = l->in[k] < 0 ? p->t_x : chunk_input(b, u) ? b->act_of[u - 1]
                                                                    : b->lact[l->in[k]];
        uint64_t aux = b->prof->layers[i].aux_bytes;
        pl->aux = aux ? vdp_add_tensor(b, VD_T_AUX, u, aux, l->name, ":aux") : -1;
        const vd_profile_layer *pr = &b->prof->layers[i];
        int af = algos[i], ab = algos[b->NL + i];
        pl->algo_fwd = af;
        pl->algo_bwd = ab;
        pl->fwd_s = vd_profile_chunk_time(b->prof, i, af, false, pr->algos[af].fwd_s, pl->n, batch);
        pl->rc_s = vd_profile_chunk_time(b->prof, i, af, false, vd_profile_rc_s(b->prof, i, af),
                                         pl->n, batch);
        pl->ws_fwd_bytes = vd_profile_chunk_ws(b->prof, i, af, false, pl->n_chunks, batch);
        pl->ws_bwd_bytes =
            fo || l->no_grad ? 0 : vd_profile_chunk_ws(b->prof, i, ab, true, pl->n_chunks, batch);
        pl->ws_fwd = pl->ws_bwd = -1;
        pl->rc_step = pl->ws_rc = -1;
        if (pl->ws_fwd_bytes)
            pl->ws_fwd = vdp_add_tensor(b, VD_T_WS, u, pl->ws_fwd_bytes, l->name, ":ws_fwd");
        if (pl->ws_bwd_bytes)
            pl->ws_bwd = vdp_add_tensor(b, VD_T_WS, u, pl->ws_bwd_bytes, l->name, ":ws_bwd");
        pl->dy = -1;
        for (int k = 0; k < VD_MAX_INPUTS; k++) { pl->dx[k] = -1; pl->dx_beta[k] = 0.0f; }
        pl->dw = -1;
        pl->dw_base = 0;
        /* the ReLU backward + conv bias gradient pair (vd_plan_layer.db_unit) */
        int c = fo || !pl->inplace ? -1 : vd_op_bias_taker(net, i);
        pl->db_unit = c >= 0 && u > 0 && p->layers[u - 1].layer == c && pl->n_chunks == 1 &&
                      p->layers[u - 1].n_chunks == 1 ? u - 1 : -1;
    }
    if (p->update_in_bwd) dw_tensors(b);
}

/* One gradient tensor per layer output (not the loss's, nor a no_grad
 * layer's: nothing needs it), except the inputs of adds and in-place ReLUs
 * whose gradient is the add's or ReLU's own (alias_grads): those share the
 * tensor of their tree's root, which keeps its name. Inside a run, one per
 * unit (its chunk's). */
static int grad_tensors(bld *b, vd_err *e) {
    const vd_net *net = b->net;
    vd_plan *p = b->p;
    int L = b->L, NL = b->NL;
    int batch = p->batch;
    int *par = vd_malloc((size_t)(NL > 0 ? NL : 1) * sizeof *par, NULL);
    bool *written = vd_calloc((size_t)(NL > 0 ? NL : 1), sizeof *written, NULL);
    int rc = !par || !written ? vd_errf(e, VD_ENOMEM, "out of memory") : VD_OK;
    for (int i = 0; i < NL && !rc; i++) par[i] = -1;
    if (!rc && b->alias) rc = alias_grads(b, net, p->loss_layer, batch, par, e);
    if (rc) { vd_free(par); vd_free(written); return rc; }
    for (int i = 0; i < NL; i++) {
        int u = p->first_unit[i];
        b->ldact[i] = -1;
        if (i == p->loss_layer || par[i] >= 0 || chunk_own(b, u) || net->layers[i].no_grad)
            continue;
        b->ldact[i] = add_map(b, VD_T_DACT, u, batch, net->layers[i].name, ":dy");
    }
    for (int i = NL - 1; i >= 0; i--)        /* par[i] > i: the root is set first */
        if (par[i] >= 0) b->ldact[i] = b->ldact[par[i]];
    for (int u = 0; u < L; u++) {
        vd_plan_layer *pl = &p->layers[u];
        b->dact_of[u] = !chunk_own(b, u) ? b->ldact[pl->layer]
                      : net->layers[pl->layer].no_grad ? -1
                      : add_map(b, VD_T_DACT, u, pl->n, net->layers[pl->layer].name, ":dy");
        pl->dy = b->dact_of[u];
    }
    /* dx and accumulation order: backward runs layers L-1..0, inputs in
     * order (a run's units keep that order between layers: only its first
     * layer reads from outside it). The first writer of a gradient
     * overwrites it (beta 0), the later ones add to it (beta 1); each chunk
     * of a split layer writes its own slice, as the layer would. An add that
     * is the first writer of an aliased input's gradient writes nothing (dx
     * -1): the shared tensor already holds its dy, and the input's other
     * consumers add to it, beta 1, as they added to the copy; an in-place
     * ReLU whose input shares its dy tensor writes dx there (dx == dy,
     * beta 0). Decided for
     * each layer's first unit, then copied to its other chunks; inside a run
     * a unit writes the chunk before it's gradient (beta 0). */
    for (int i = NL - 1; i >= 0; i--) {
        const vd_layer *l = &net->layers[i];
        vd_plan_layer *pl = &p->layers[p->first_unit[i]];
        if (chunk_input(b, p->first_unit[i])) continue;
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in[k];
            if (src < 0 || net->layers[src].no_grad) continue;   /* no gradient wanted */
            bool first = !written[src];
            written[src] = true;
            if (first && par[src] == i && vd_op_table[l->op].bwd_is_dy) continue;   /* dx -1 */
            pl->dx[k] = b->ldact[src];
            pl->dx_beta[k] = first ? 0.0f : 1.0f;
        }
    }
    for (int u = 0; u < L; u++) {
        vd_plan_layer *pl = &p->layers[u];
        if (chunk_input(b, u)) {
            pl->dx[0] = b->dact_of[u - 1];
            pl->dx_beta[0] = 0.0f;
        } else if (p->first_unit[pl->layer] != u) {
            const vd_plan_layer *f = &p->layers[p->first_unit[pl->layer]];
            memcpy(pl->dx, f->dx, sizeof pl->dx);
            memcpy(pl->dx_beta, f->dx_beta, sizeof pl->dx_beta);
        }
    }
    vd_free(par);
    vd_free(written);
    return VD_OK;
}

/* The max pool + ReLU backward pairs (vd_plan_layer.takes_relu): a whole
 * max pool right after the whole in-place ReLU it reads (vd_op_pool_relu),
 * whose dx alias_grads made its dy tensor, which the pool writes first. */
static void pool_relu_pairs(bld *b) {
    vd_plan *p = b->p;
    for (int u = 0; u < b->L; u++) {
        vd_plan_layer *pl = &p->layers[u];
        pl->takes_relu = false;
        if (p->forward_only || u == 0) continue;
        const vd_plan_layer *r = &p->layers[u - 1];
        pl->takes_relu = vd_op_pool_relu(b->net, pl->layer) == r->layer && pl->n_chunks == 1 &&
                         r->n_chunks == 1 && r->dy >= 0 && r->dx[0] == r->dy &&
                         r->dx_beta[0] == 0.0f && pl->dx[0] == r->dy && pl->dx_beta[0] == 0.0f;
    }
}

/* The batch norm + add + ReLU backward pairs (vd_plan_layer.takes_add_relu):
 * a whole batch norm, the whole add right after it that writes no input's
 * gradient (all of them its dy tensor), and the whole in-place ReLU after
 * that whose dx alias_grads made its dy tensor, which the batch norm reads
 * as its dy. The batch norm's backward is the first to read that tensor
 * after the ReLU's (the add's reads nothing it writes). */
static void bn_add_relu_pairs(bld *b) {
    vd_plan *p = b->p;
    for (int u = 0; u < b->L; u++) {
        vd_plan_layer *pl = &p->layers[u];
        pl->takes_add_relu = false;
        if (p->forward_only || u + 2 >= b->L) continue;
        const vd_plan_layer *a = &p->layers[u + 1], *r = &p->layers[u + 2];
        if (b->add_relu[pl->layer] != r->layer || a->layer != pl->layer + 1 ||
            pl->n_chunks != 1 || a->n_chunks != 1 || r->n_chunks != 1)
            continue;
        bool quiet = true;   /* the add's backward writes nothing */
        for (int k = 0; k < b->net->layers[a->layer].n_in; k++) quiet &= a->dx[k] < 0;
        pl->takes_add_relu = quiet && r->dy >= 0 && r->dx[0] == r->dy && r->dx_beta[0] == 0.0f &&
                             a->dy == r->dy && pl->dy == r->dy;
    }
}

/* Liveness: each tensor's reads and writes per step. */
static void liveness(bld *b) {
    const vd_net *net = b->net;
    vd_plan *p = b->p;
    int L = b->L;
    bool fo = p->forward_only;
    vdp_touch(b, p->t_x, 0);
    for (int u = 0; u < L; u++) {
        vd_plan_layer *pl = &p->layers[u];
        int i = pl->layer;
        const vd_layer *l = &net->layers[i];
        int sf = u;
        for (int k = 0; k < l->n_in; k++) vdp_rd(b, pl->in_t[k], sf);
        wr(b, pl->y, sf);
        wr(b, pl->aux, sf);
        vdp_touch(b, pl->ws_fwd, sf);
        if (i == p->loss_layer) vdp_rd(b, p->t_labels, sf);
        if (fo || l->no_grad) continue;   /* (a no_grad layer's backward does not run) */
        int sb = vdp_bwd_step(L, u);
        bool rx, ry;
        vd_op_bwd_reads(net, i, &rx, &ry);
        if (rx)
            for (int k = 0; k < l->n_in; k++) vdp_rd(b, pl->in_t[k], sb);
        if (ry) vdp_rd(b, pl->y, sb);
        vdp_rd(b, pl->dy, sb);
        vdp_rd(b, pl->aux, sb);
        vdp_touch(b, pl->ws_bwd, sb);
        vdp_touch(b, pl->dw, sb);
        if (pl->db_unit >= 0) vdp_touch(b, p->layers[pl->db_unit].dw, sb);   /* its bias's db */
        if (pl->takes_relu && p->layers[u - 1].db_unit >= 0)   /* its ReLU's conv's db */
            vdp_touch(b, p->layers[p->layers[u - 1].db_unit].dw, sb);
        if (pl->takes_add_relu) vdp_rd(b, p->layers[u + 2].y, sb);   /* its ReLU's y */
        if (i == p->loss_layer) vdp_rd(b, p->t_labels, sb);
        for (int k = 0; k < l->n_in; k++) wr(b, pl->dx[k], sb);
    }
    bn_fold_liveness(b);
    /* The loss value (aux) and the loss output (eval argmax) are read back
     * after the last step. */
    const vd_plan_layer *ll = &p->layers[p->first_unit[p->loss_layer]];
    vdp_touch(b, ll->aux, p->n_steps - 1);
    if (fo) vdp_touch(b, ll->y, p->n_steps - 1);

    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        if (b->last_touch[t] < 0) {
            /* Never used (e.g. a dead branch's aux): give it a one-step life
             * at step 0 so every tensor has a region. */
            b->first_touch[t] = b->last_touch[t] = 0;
        }
        T->prod_step = b->first_touch[t];
    }
}

bool vdp_unit_paired(const vd_plan *p, int u) {
    const vd_plan_layer *pl = &p->layers[u];
    return pl->takes_relu || pl->takes_add_relu || vd_plan_unit_taken(p, u) ||
           (u + 1 < p->n_units && p->layers[u + 1].db_unit == u);
}

/* What layer_tensors and grad_tensors read of the net: the in-place flags
 * of the units (in b->extra), the batch norm + add fusion's pairs
 * (b->bn_fold; it asks of every unit) and the batch norm + add + ReLU
 * backward pairs (b->add_relu). A split layer runs in place only inside its
 * run: its first layer's input and its last layer's output are the whole
 * batch's. */
static int unit_flags(bld *b, vd_err *e) {
    const vd_net *net = b->net;
    const vd_plan *p = b->p;
    int NL = b->NL;
    if (b->opts->fuse_bn_add && !p->forward_only) {
        int rc = vd_op_bn_folds(net, b->bn_fold, e);
        if (rc) return rc;
        for (int a = 0; a < NL; a++)
            if (net->layers[a].op == VD_OP_ADD && b->bn_fold[a] >= 0) b->bn_fold[b->bn_fold[a]] = a;
    } else {
        for (int l = 0; l < NL; l++) b->bn_fold[l] = -1;
    }
    /* (the backward pair only where the forward's fusion is on: channels-last
     * maps, where the batch norm masks dy in its own pass; elsewhere the
     * pair would keep the ReLU's y to the batch norm's step for nothing) */
    for (int l = 0; l < NL; l++)
        b->add_relu[l] = p->forward_only || !b->opts->fuse_bn_add ? -1 : vd_op_add_relu(net, l);
    bool *ipf = vd_malloc((size_t)(NL > 0 ? NL : 1) * sizeof *ipf, NULL);
    if (!ipf) return vd_errf(e, VD_ENOMEM, "out of memory building the plan");
    vd_schedule_inplace_flags(net, ipf);
    for (int u = 0; u < b->L; u++) {
        int l = p->layers[u].layer;
        b->extra[u] = ipf[l] && (p->layers[u].n_chunks == 1 || (l > b->run_a[l] && l < b->run_b[l]));
    }
    vd_free(ipf);
    return VD_OK;
}

/* Create tensors and liveness (no decisions yet). */
int vdp_build_tensors(bld *b, const int *algos, vd_err *e) {
    int rc = unit_flags(b, e);
    if (rc) return rc;
    fixed_tensors(b);
    layer_tensors(b, algos);
    if (!b->p->forward_only && (rc = grad_tensors(b, e))) return rc;
    pool_relu_pairs(b);
    bn_add_relu_pairs(b);
    liveness(b);
    return VD_OK;
}
