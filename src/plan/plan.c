/* plan.c — schedule, liveness, offload and recompute decisions, prefetch
 * scheduling, the per-step action lists, dyn search and minimum budgets.
 * The auto policy's search lives in auto.c. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plan/plan.h"
#include "plan/plan_internal.h"

/* ---- names -------------------------------------------------------------- */

static const char *const policy_names[VD_POLICY_COUNT] = {"none", "all", "conv", "dyn", "auto"};
static const char *const prefetch_names[VD_PREFETCH_COUNT] = {"auto", "paper"};

const char *vd_policy_name(vd_policy p) {
    return (unsigned)p < VD_POLICY_COUNT ? policy_names[p] : "?";
}

int vd_policy_parse(const char *s, vd_policy *out, vd_err *e) {
    for (int i = 0; i < VD_POLICY_COUNT; i++)
        if (strcmp(s, policy_names[i]) == 0) { *out = (vd_policy)i; return VD_OK; }
    const char *sug = vd_suggest(s, policy_names, VD_POLICY_COUNT);
    return vd_errf(e, VD_EUSAGE, "unknown policy '%s'%s%s%s (expected none, all, conv, dyn or auto)",
                   s, sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
}

const char *vd_prefetch_name(vd_prefetch p) {
    return (unsigned)p < VD_PREFETCH_COUNT ? prefetch_names[p] : "?";
}

int vd_prefetch_parse(const char *s, vd_prefetch *out, vd_err *e) {
    for (int i = 0; i < VD_PREFETCH_COUNT; i++)
        if (strcmp(s, prefetch_names[i]) == 0) { *out = (vd_prefetch)i; return VD_OK; }
    const char *sug = vd_suggest(s, prefetch_names, VD_PREFETCH_COUNT);
    return vd_errf(e, VD_EUSAGE, "unknown prefetch mode '%s'%s%s%s (expected auto or paper)",
                   s, sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
}

const char *vd_tensor_kind_name(vd_tensor_kind k) {
    static const char *const n[VD_T_KIND_COUNT] = {
        "params", "momentum", "grads", "input", "labels", "act", "dact", "aux", "workspace"};
    return (unsigned)k < VD_T_KIND_COUNT ? n[k] : "?";
}

const char *vd_action_name(vd_action_kind k) {
    static const char *const n[] = {"wait_offload", "free", "record_free", "alloc",
                                    "prefetch", "wait_prefetch", "compute", "offload",
                                    "recompute", "load_staged"};
    return (unsigned)k < VD_ARRAY_LEN(n) ? n[k] : "?";
}

const char *vd_stage_name(vd_stage s) {
    static const char *const n[] = {"on", "off", "no room", "no gain", "n/a"};
    return (unsigned)s < VD_ARRAY_LEN(n) ? n[s] : "?";
}

const char *vd_disp_name(vd_disp d) {
    static const char *const n[VD_DISP_COUNT] = {"auto", "keep", "offload", "recompute"};
    return (unsigned)d < VD_DISP_COUNT ? n[d] : "?";
}

void vd_plan_opts_init(vd_plan_opts *o) {
    memset(o, 0, sizeof *o);
    o->policy = VD_POLICY_NONE;
    o->prefetch = VD_PREFETCH_AUTO;
    o->fixed_algo = -1;
}

/* ---- in-place ----------------------------------------------------------- */

static int n_consumers(const vd_net *net, int src) {
    int n = 0;
    for (int j = 0; j < net->n_layers; j++)
        for (int k = 0; k < net->layers[j].n_in; k++)
            if (net->layers[j].in[k] == src) n++;
    return n;
}

void vd_schedule_inplace_flags(const vd_net *net, bool *inplace) {
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        const vd_op_info *op = &vd_op_table[l->op];
        inplace[i] = false;
        if (!op->can_inplace || op->bwd_needs_x || l->n_in != 1) continue;
        int src = l->in[0];
        if (src < 0) continue;                        /* never overwrite the net input */
        if (n_consumers(net, src) != 1) continue;
        /* The producer's output is overwritten: its backward must not read it
         * (for an in-place producer, "its output" is the same region: the
         * chain's earlier members' backward must not need their y either). */
        int p = src;
        bool ok = true;
        for (;;) {
            if (vd_op_table[net->layers[p].op].bwd_needs_y) { ok = false; break; }
            if (!inplace[p]) break;
            p = net->layers[p].in[0];
        }
        inplace[i] = ok;
    }
}

void vd_schedule_inplace(vd_net *net) {
    bool *f = calloc((size_t)(net->n_layers > 0 ? net->n_layers : 1), sizeof *f);
    if (!f) return;  /* flags stay as they were; the plan never depends on them */
    vd_schedule_inplace_flags(net, f);
    for (int i = 0; i < net->n_layers; i++) net->layers[i].inplace = f[i];
    free(f);
}

/* ---- builder ------------------------------------------------------------ */

typedef struct bld {
    const vd_net *net;
    const vd_profile *prof;
    const vd_plan_opts *opts;
    vd_plan *p;
    int L;
    int variant;       /* see build_fixed */
    int cap_t, cap_iv, cap_a;
    int *act_of;       /* [L] ACT tensor of layer output */
    int *dact_of;      /* [L] DACT tensor of layer output (-1) */
    int *fwd_write;    /* [n_tensors cap] last forward step writing the tensor */
    int *first_touch;  /* [cap_t] min step */
    int *last_touch;   /* [cap_t] max step */
    int *extra;        /* [cap_t] scratch */
    int *bucket_head;  /* [5 * (n_steps + 1)] build_actions */
    int *bucket_next;  /* [5 * max(cap_iv, cap_t)] */
    const vd_disp *disp; /* opts->disp ([L + 1]) or NULL */
    int *rc_ops;       /* [L] build_actions: recomputed layers by (rc_step, layer) */
    bool alias;        /* adds may share their dy tensor with their inputs' gradients
                          (alias_add_grads; build_fixed) */
} bld;

static int bwd_step(int L, int layer) { return 2 * L - 1 - layer; }

static int add_tensor(bld *b, vd_tensor_kind kind, int layer, uint64_t bytes,
                      const char *name, const char *suffix) {
    vd_plan *p = b->p;
    int t = p->n_tensors++;
    vd_tensor *T = &p->tensors[t];
    memset(T, 0, sizeof *T);
    snprintf(T->name, sizeof T->name, "%s%s", name, suffix ? suffix : "");
    T->kind = kind;
    T->layer = layer;
    T->bytes = bytes;
    T->prod_step = -1;
    T->fwd_last = T->bwd_first = T->bwd_last = -1;
    T->offload_step = T->release_step = T->prefetch_step = -1;
    T->ev_compute = T->ev_d2h = -1;
    T->iv[0] = T->iv[1] = -1;
    T->recompute_step = -1;
    b->fwd_write[t] = -1;
    b->first_touch[t] = INT32_MAX;
    b->last_touch[t] = -1;
    return t;
}

static void touch(bld *b, int t, int s) {
    if (t < 0) return;
    if (s < b->first_touch[t]) b->first_touch[t] = s;
    if (s > b->last_touch[t]) b->last_touch[t] = s;
}

/* Record a read of t at step s. */
static void rd(bld *b, int t, int s) {
    if (t < 0) return;
    vd_tensor *T = &b->p->tensors[t];
    touch(b, t, s);
    if (s < b->L) {
        if (s > T->fwd_last) T->fwd_last = s;
    } else if (s < 2 * b->L) {
        if (T->bwd_first < 0 || s < T->bwd_first) T->bwd_first = s;
        if (s > T->bwd_last) T->bwd_last = s;
    }
}

static void wr(bld *b, int t, int s) {
    if (t < 0) return;
    touch(b, t, s);
    if (s < b->L && s > b->fwd_write[t]) b->fwd_write[t] = s;
}

static uint64_t act_bytes(const vd_net *net, int i, int batch) {
    return (uint64_t)batch * (uint64_t)vd_net_out_numel(net, i) * 4u;
}

/* Pool bytes of a tensor: 256-aligned, at least 256. */
static uint64_t iv_size(uint64_t bytes) {
    uint64_t a = VD_ALIGN_UP(bytes, (uint64_t)VD_PLAN_ALIGN);
    return a ? a : VD_PLAN_ALIGN;
}

static int add_interval(bld *b, int t, int first, int last, vd_fill fill, int need) {
    vd_plan *p = b->p;
    int k = p->n_intervals++;
    vd_interval *iv = &p->intervals[k];
    memset(iv, 0, sizeof *iv);
    iv->tensor = t;
    iv->first = first;
    iv->last = last;
    iv->bytes = iv_size(p->tensors[t].bytes);
    iv->fill = fill;
    iv->need_step = need;
    iv->ev_h2d = -1;
    vd_tensor *T = &p->tensors[t];
    T->iv[T->n_iv++] = k;
    return k;
}

/* ---- gradient aliasing through adds ------------------------------------- */

/* An add passes its output gradient dy unchanged to every input, and its
 * backward used to copy it (beta 0) or add it (beta 1) into each input's own
 * gradient tensor. When add a is the first backward writer of the gradient of
 * its input src (a is src's highest consumer, src appears once among a's
 * inputs, same size), that gradient can BE a's dy tensor: a writes nothing for
 * the input (dx[k] = -1) and src's other consumers accumulate (beta 1) into
 * the shared tensor after a has read it, as they did into the copy. Same
 * sums in the same order: the bytes are those of the copy.
 *
 * The aliased gradients of one physical tensor form a tree: its root owns
 * the tensor (a layer whose gradient is not aliased), the children of an add
 * are its aliased inputs (par[child] = the add). Every node w reads the
 * tensor as dy at its backward step and must find exactly its own gradient
 * there: the root's, then the contributions of the other consumers of each
 * node on the path from the root down to w, in backward order. Those come
 * in that order and before w's read by construction: the other consumers of
 * a node y lie between y and par[y] in layer order (above y: they consume
 * it; below par[y]: the add writes y's gradient first), so they run after
 * par[y] and y's other ancestors have read, and before y and its
 * descendants read. What can go wrong: a node x that is neither w nor an
 * ancestor of w (w's gradient holds none of x's contributions) with another
 * consumer that runs before w reads (above w). So the rule: for every such
 * pair, every other consumer of x is below w. It also keeps a layer from
 * reading the shared tensor as dy while it writes it as dx (a consumer of x
 * equal to w), and covers chains of adds, an add's input that the add's
 * other branch consumes too, and sibling inputs with other consumers. The
 * candidates are taken in backward order (adds from the last layer down,
 * inputs in order); each is kept only if its whole tree still obeys the rule.
 *
 * par[L] receives the add whose dy tensor is layer v's gradient (-1: v has
 * its own tensor, or none). */
static int tree_root(const int *par, int v) {
    while (par[v] >= 0) v = par[v];
    return v;
}

static bool in_subtree(const int *par, int w, int x) {
    for (; w >= 0; w = par[w])
        if (w == x) return true;
    return false;
}

/* Does the tree rooted at r satisfy the rule? oth[x]: x's highest consumer
 * other than its first writer (-1 none); mem: scratch [L]. */
static bool alias_tree_ok(const int *par, const int *oth, int L, int r, int *mem) {
    int n = 0;
    for (int v = 0; v < L; v++)
        if (tree_root(par, v) == r) mem[n++] = v;
    for (int a = 0; a < n; a++) {
        int x = mem[a];
        if (x == r || oth[x] < 0) continue;   /* the root's consumers precede every read */
        for (int c = 0; c < n; c++) {
            int w = mem[c];
            if (!in_subtree(par, w, x) && oth[x] >= w) return false;
        }
    }
    return true;
}

static int alias_add_grads(const vd_net *net, int loss, int batch, int *par, vd_err *e) {
    int L = net->n_layers;
    for (int v = 0; v < L; v++) par[v] = -1;
    int *fw = malloc((size_t)(L > 0 ? L : 1) * 5 * sizeof *fw);
    if (!fw) return vd_errf(e, VD_ENOMEM, "out of memory");
    int *fwk = fw + L, *oth = fw + 2 * L, *mem = fw + 3 * L, *cand = fw + 4 * L;
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
        if (l->op != VD_OP_ADD || a == loss) continue;
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in[k];
            if (src < 0 || fw[src] != a || fwk[src] != k) continue;
            bool dup = false;
            for (int j = 0; j < l->n_in; j++) dup |= j != k && l->in[j] == src;
            if (dup || act_bytes(net, src, batch) != act_bytes(net, a, batch)) continue;
            cand[nc++] = src;
        }
    }
    for (int c = 0; c < nc; c++) {
        int src = cand[c];
        par[src] = fw[src];
        if (!alias_tree_ok(par, oth, L, tree_root(par, src), mem)) par[src] = -1;
    }
    free(fw);
    return VD_OK;
}

/* Create tensors and liveness (no decisions yet). */
static int build_tensors(bld *b, const int *algos, vd_err *e) {
    const vd_net *net = b->net;
    vd_plan *p = b->p;
    int L = b->L;
    int batch = p->batch;
    bool fo = p->forward_only;
    uint64_t pbytes = (uint64_t)net->param_floats * 4u;

    p->t_params = add_tensor(b, VD_T_PARAMS, -1, pbytes, "params", NULL);
    p->t_mom = add_tensor(b, VD_T_MOMENTUM, -1, pbytes, "momentum", NULL);
    p->t_grads = fo ? -1 : add_tensor(b, VD_T_GRADS, -1, pbytes, "grads", NULL);
    p->t_x = add_tensor(b, VD_T_INPUT, -1, act_bytes(net, -1, batch), "x", NULL);
    p->t_labels = add_tensor(b, VD_T_LABELS, -1, (uint64_t)batch * 4u, "labels", NULL);
    int persist[3] = {p->t_params, p->t_mom, p->t_grads};
    for (int k = 0; k < 3; k++) {
        if (persist[k] < 0) continue;
        p->tensors[persist[k]].persistent = true;
        touch(b, persist[k], 0);
        touch(b, persist[k], p->n_steps - 1);
    }

    for (int i = 0; i < L; i++) {
        const vd_layer *l = &net->layers[i];
        vd_plan_layer *pl = &p->layers[i];
        pl->inplace = l->n_in == 1 && b->extra[i];  /* extra holds inplace flags here */
        if (pl->inplace) {
            b->act_of[i] = b->act_of[l->in[0]];
        } else {
            b->act_of[i] = add_tensor(b, VD_T_ACT, i, act_bytes(net, i, batch), l->name, ":y");
        }
        pl->y = b->act_of[i];
        for (int k = 0; k < l->n_in; k++)
            pl->in_t[k] = l->in[k] < 0 ? p->t_x : b->act_of[l->in[k]];
        uint64_t aux = b->prof->layers[i].aux_bytes;
        pl->aux = aux ? add_tensor(b, VD_T_AUX, i, aux, l->name, ":aux") : -1;
        const vd_profile_layer *pr = &b->prof->layers[i];
        int af = algos[i], ab = algos[L + i];
        pl->algo = pl->algo_fwd = af;
        pl->algo_bwd = ab;
        snprintf(pl->algo_label, sizeof pl->algo_label, "%s", pr->algos[af].label);
        snprintf(pl->algo_bwd_label, sizeof pl->algo_bwd_label, "%s", pr->algos[ab].label);
        pl->ws_bytes = pl->ws_fwd_bytes = vd_profile_algo_ws(&pr->algos[af], false);
        pl->ws_bwd_bytes = fo ? 0 : vd_profile_algo_ws(&pr->algos[ab], true);
        pl->ws_fwd = pl->ws_bwd = -1;
        pl->rc_step = pl->ws_rc = -1;
        if (pl->ws_fwd_bytes)
            pl->ws_fwd = add_tensor(b, VD_T_WS, i, pl->ws_fwd_bytes, l->name, ":ws_fwd");
        if (pl->ws_bwd_bytes)
            pl->ws_bwd = add_tensor(b, VD_T_WS, i, pl->ws_bwd_bytes, l->name, ":ws_bwd");
        pl->dy = -1;
        for (int k = 0; k < VD_MAX_INPUTS; k++) { pl->dx[k] = -1; pl->dx_beta[k] = 0.0f; }
    }
    if (!fo) {
        /* One gradient tensor per layer output (not the loss's), except the
         * inputs of adds whose gradient is the add's own (alias_add_grads):
         * those share the tensor of their tree's root, which keeps its name. */
        int *par = malloc((size_t)(L > 0 ? L : 1) * sizeof *par);
        bool *written = calloc((size_t)(L > 0 ? L : 1), sizeof *written);
        int rc = !par || !written ? vd_errf(e, VD_ENOMEM, "out of memory") : VD_OK;
        for (int i = 0; i < L && !rc; i++) par[i] = -1;
        if (!rc && b->alias) rc = alias_add_grads(net, p->loss_layer, batch, par, e);
        if (rc) { free(par); free(written); return rc; }
        for (int i = 0; i < L; i++) {
            b->dact_of[i] = -1;
            if (i == p->loss_layer || par[i] >= 0) continue;
            b->dact_of[i] = add_tensor(b, VD_T_DACT, i, act_bytes(net, i, batch),
                                       net->layers[i].name, ":dy");
        }
        for (int i = L - 1; i >= 0; i--)        /* par[i] > i: the root is set first */
            if (par[i] >= 0) b->dact_of[i] = b->dact_of[par[i]];
        for (int i = 0; i < L; i++) p->layers[i].dy = b->dact_of[i];
        /* dx and accumulation order: backward runs layers L-1..0, inputs in
         * order. The first writer of a gradient overwrites it (beta 0), the
         * later ones add to it (beta 1). An add that is the first writer of
         * an aliased input's gradient writes nothing (dx -1): the shared
         * tensor already holds its dy, and the input's other consumers add
         * to it, beta 1, as they added to the copy. */
        for (int i = L - 1; i >= 0; i--) {
            const vd_layer *l = &net->layers[i];
            for (int k = 0; k < l->n_in; k++) {
                int src = l->in[k];
                if (src < 0) continue;
                bool first = !written[src];
                written[src] = true;
                if (first && par[src] == i) continue;   /* dx -1, beta 0 */
                p->layers[i].dx[k] = b->dact_of[src];
                p->layers[i].dx_beta[k] = first ? 0.0f : 1.0f;
            }
        }
        free(par);
        free(written);
    }

    /* Liveness. */
    touch(b, p->t_x, 0);
    for (int i = 0; i < L; i++) {
        const vd_layer *l = &net->layers[i];
        const vd_op_info *op = &vd_op_table[l->op];
        vd_plan_layer *pl = &p->layers[i];
        int sf = i;
        for (int k = 0; k < l->n_in; k++) rd(b, pl->in_t[k], sf);
        wr(b, pl->y, sf);
        wr(b, pl->aux, sf);
        touch(b, pl->ws_fwd, sf);
        if (i == p->loss_layer) rd(b, p->t_labels, sf);
        if (fo) continue;
        int sb = bwd_step(L, i);
        if (op->bwd_needs_x)
            for (int k = 0; k < l->n_in; k++) rd(b, pl->in_t[k], sb);
        if (op->bwd_needs_y) rd(b, pl->y, sb);
        rd(b, pl->dy, sb);
        rd(b, pl->aux, sb);
        touch(b, pl->ws_bwd, sb);
        if (i == p->loss_layer) rd(b, p->t_labels, sb);
        for (int k = 0; k < l->n_in; k++) wr(b, pl->dx[k], sb);
    }
    /* The loss value (aux) and the loss output (eval argmax) are read back
     * after the last step. */
    const vd_plan_layer *ll = &p->layers[p->loss_layer];
    touch(b, ll->aux, p->n_steps - 1);
    if (fo) touch(b, ll->y, p->n_steps - 1);

    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        if (b->last_touch[t] < 0) {
            /* Never used (e.g. a dead branch's aux): give it a one-step life
             * at step 0 so every tensor has a region. */
            b->first_touch[t] = b->last_touch[t] = 0;
        }
        T->prod_step = b->first_touch[t];
    }
    return VD_OK;
}

/* Is tensor t a candidate for offloading under policy pol? */
static bool offload_candidate(const bld *b, int t, vd_policy pol) {
    const vd_plan *p = b->p;
    const vd_tensor *T = &p->tensors[t];
    if (pol == VD_POLICY_NONE || pol == VD_POLICY_AUTO || p->forward_only) return false;
    if (T->kind != VD_T_ACT && T->kind != VD_T_INPUT) return false;
    if (T->bwd_first < 0 || T->fwd_last < 0) return false;
    /* It must be absent for at least one step with a prefetch issued after
     * it: gap >= 2 free steps between last forward use and first backward use. */
    if (T->bwd_first - T->fwd_last - 1 < 2) return false;
    if (pol == VD_POLICY_CONV) {
        /* a conv input: its first backward reader's layer or any reader is a conv */
        for (int i = 0; i < b->L; i++) {
            if (b->net->layers[i].op != VD_OP_CONV) continue;
            for (int k = 0; k < b->net->layers[i].n_in; k++)
                if (p->layers[i].in_t[k] == t) return true;
        }
        return false;
    }
    return true;
}

/* The requested disposition of tensor t (AUTO when none was given). */
static vd_disp disp_of(const bld *b, int t) {
    const vd_tensor *T = &b->p->tensors[t];
    if (!b->disp) return VD_DISP_AUTO;
    if (T->kind == VD_T_INPUT) return b->disp[0];
    if (T->kind == VD_T_ACT) return b->disp[T->layer + 1];
    return VD_DISP_AUTO;
}

/* Offload t? An explicit OFFLOAD needs only the gap; so does a RECOMPUTE
 * that could not be honoured (its fallback); KEEP never offloads. */
static bool want_offload(const bld *b, int t, vd_policy pol) {
    vd_disp d = disp_of(b, t);
    if (b->p->tensors[t].recompute || d == VD_DISP_KEEP) return false;
    if (d == VD_DISP_OFFLOAD || d == VD_DISP_RECOMPUTE) return offload_candidate(b, t, VD_POLICY_ALL);
    return offload_candidate(b, t, pol);
}

/* Can feature map t be recomputed? It must be a layer output read in
 * backward, absent for at least one step in between, and written only by
 * stateless forward ops (not batch norm: running statistics; not the loss;
 * no per-layer saved state at all). */
static bool recompute_ok(const bld *b, int t) {
    const vd_plan *p = b->p;
    const vd_tensor *T = &p->tensors[t];
    if (p->forward_only || T->kind != VD_T_ACT || T->layer < 0) return false;
    if (T->bwd_first < 0 || T->fwd_last < 0) return false;
    if (T->bwd_first - T->fwd_last - 1 < 1) return false;
    for (int j = T->layer; j < b->L; j++) {
        if (p->layers[j].y != t) continue;
        vd_op op = b->net->layers[j].op;
        if (op == VD_OP_BATCHNORM || op == VD_OP_SOFTMAX_XENT || p->layers[j].aux >= 0) return false;
    }
    return true;
}

/* Recompute decisions from b->disp, producers from the last layer down: a
 * recompute at step r reads its producer's inputs at r, which can move their
 * own first backward use (and so their recompute step) earlier. The writers
 * (producer, then the in-place layers that overwrite the tensor) get rc_step
 * and, when they need workspace, a one-step WS tensor at r. */
static void decide_recompute(bld *b) {
    vd_plan *p = b->p;
    if (p->forward_only || !b->disp) return;
    for (int i = b->L - 1; i >= 0; i--) {
        vd_plan_layer *pl = &p->layers[i];
        if (pl->inplace || b->disp[i + 1] != VD_DISP_RECOMPUTE) continue;
        int t = pl->y;
        if (p->tensors[t].layer != i || !recompute_ok(b, t)) continue;
        int r = p->tensors[t].bwd_first;
        p->tensors[t].recompute = true;
        p->tensors[t].recompute_step = r;
        p->tensors[t].recompute_s = 0;
        for (int j = i; j < b->L; j++) {
            vd_plan_layer *wl = &p->layers[j];
            if (wl->y != t) continue;
            wl->rc_step = r;
            p->tensors[t].recompute_s += b->prof->layers[j].algos[wl->algo].fwd_s;
            if (wl->ws_bytes) {
                wl->ws_rc = add_tensor(b, VD_T_WS, j, wl->ws_bytes, b->net->layers[j].name, ":ws_rc");
                touch(b, wl->ws_rc, r);
                p->tensors[wl->ws_rc].prod_step = r;
            }
            if (j == i)
                for (int k = 0; k < b->net->layers[i].n_in; k++) rd(b, wl->in_t[k], r);
        }
    }
}

/* Build intervals, events and actions from the decisions recorded in the
 * tensors (offload, release_step, prefetch_step, recompute). Clears previous ones. */
static void build_intervals(bld *b) {
    vd_plan *p = b->p;
    p->n_intervals = 0;
    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        T->n_iv = 0;
        T->iv[0] = T->iv[1] = -1;
        int first = b->first_touch[t], last = b->last_touch[t];
        vd_fill f0 = T->kind == VD_T_INPUT ? VD_FILL_INPUT_X
                   : T->kind == VD_T_LABELS ? VD_FILL_LABELS : VD_FILL_NONE;
        if (T->recompute) {
            add_interval(b, t, first, T->fwd_last, f0, first);
            add_interval(b, t, T->recompute_step, last, VD_FILL_NONE, T->recompute_step);
        } else if (!T->offload) {
            add_interval(b, t, first, last, f0, first);
        } else {
            add_interval(b, t, first, T->release_step - 1, f0, first);
            add_interval(b, t, T->prefetch_step, last,
                         T->host_src ? VD_FILL_INPUT_X : VD_FILL_HOST_STORE, T->bwd_first);
        }
    }
}

/* Live bytes per step from intervals. */
static void mem_per_step(const vd_plan *p, uint64_t *mem) {
    for (int s = 0; s < p->n_steps; s++) mem[s] = 0;
    for (int k = 0; k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        for (int s = iv->first; s <= iv->last; s++) mem[s] += iv->bytes;
    }
}

/* Events and action lists. */
static void build_actions(bld *b) {
    vd_plan *p = b->p;
    int ne = 0;
    p->n_actions = 0;
    for (int s = 0; s <= p->n_steps; s++) p->steps[s].ev_free = -1;
    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        T->ev_compute = T->ev_d2h = -1;
        if (T->offload && !T->host_src) { T->ev_compute = ne++; T->ev_d2h = ne++; }
    }
    for (int k = 0; k < p->n_intervals; k++) {
        vd_interval *iv = &p->intervals[k];
        iv->ev_h2d = -1;
        if (iv->fill != VD_FILL_NONE) {
            iv->ev_h2d = ne++;
            if (p->steps[iv->first].ev_free < 0) p->steps[iv->first].ev_free = ne++;
        }
    }
    p->ev_input = -1;
    p->ev_end = ne++;
    p->ev_loss = ne++;
    p->n_events = ne;

    vd_action *A = p->actions;
    int na = 0;
    /* Bucket intervals by first / last / need step and tensors by release /
     * offload step (linked lists through the scratch arrays). */
    int ns = p->n_steps + 1;
    int *head = b->bucket_head;        /* [5 * ns] */
    int *next = b->bucket_next;        /* [5 * cap] */
    for (int k = 0; k < 5 * ns; k++) head[k] = -1;
    int cap = b->cap_iv > b->cap_t ? b->cap_iv : b->cap_t;
    for (int k = p->n_intervals - 1; k >= 0; k--) {
        const vd_interval *iv = &p->intervals[k];
        next[0 * cap + k] = head[0 * ns + iv->first]; head[0 * ns + iv->first] = k;
        int fr = iv->last + 1;
        next[1 * cap + k] = head[1 * ns + fr]; head[1 * ns + fr] = k;
        if (iv->fill != VD_FILL_NONE) {
            next[2 * cap + k] = head[2 * ns + iv->need_step]; head[2 * ns + iv->need_step] = k;
        }
    }
    for (int t = p->n_tensors - 1; t >= 0; t--) {
        const vd_tensor *T = &p->tensors[t];
        if (!T->offload || T->host_src) continue;
        next[3 * cap + t] = head[3 * ns + T->release_step]; head[3 * ns + T->release_step] = t;
        next[4 * cap + t] = head[4 * ns + T->offload_step]; head[4 * ns + T->offload_step] = t;
    }
    /* Recomputed layers by (step, layer): producers before their consumers. */
    int n_rc = 0;
    for (int j = 0; j < b->L; j++) {
        if (p->layers[j].rc_step < 0) continue;
        int k = n_rc++;
        while (k > 0 && p->layers[b->rc_ops[k - 1]].rc_step > p->layers[j].rc_step) {
            b->rc_ops[k] = b->rc_ops[k - 1];
            k--;
        }
        b->rc_ops[k] = j;
    }
    int rc_next = 0;
#define PUSH(k, a) do { A[na].kind = (k); A[na].arg = (a); na++; } while (0)
    for (int s = 0; s <= p->n_steps; s++) {
        vd_step *st = &p->steps[s];
        st->first_action = na;
        st->recompute_s = 0;
        for (int t = head[3 * ns + s]; t >= 0; t = next[3 * cap + t]) PUSH(VD_A_WAIT_OFFLOAD, t);
        if (s > 0)
            for (int k = head[1 * ns + s]; k >= 0; k = next[1 * cap + k]) PUSH(VD_A_FREE, k);
        if (s < p->n_steps) {
            if (st->ev_free >= 0) PUSH(VD_A_RECORD_FREE, st->ev_free);
            for (int k = head[0 * ns + s]; k >= 0; k = next[0 * cap + k]) PUSH(VD_A_ALLOC, k);
            int pf0 = na;
            for (int k = head[0 * ns + s]; k >= 0; k = next[0 * cap + k])
                if (p->intervals[k].fill != VD_FILL_NONE) PUSH(VD_A_PREFETCH, k);
            /* the H2D queue serves copies in issue order: most urgent first */
            for (int x = pf0 + 1; x < na; x++)
                for (int y = x; y > pf0 && p->intervals[A[y - 1].arg].need_step >
                                           p->intervals[A[y].arg].need_step; y--) {
                    vd_action tmp = A[y]; A[y] = A[y - 1]; A[y - 1] = tmp;
                }
            for (int k = head[2 * ns + s]; k >= 0; k = next[2 * cap + k]) PUSH(VD_A_WAIT_PREFETCH, k);
            if (s == 0 && p->t_stage >= 0) PUSH(VD_A_LOAD_STAGED, p->tensors[p->t_x].iv[0]);
            for (; rc_next < n_rc && p->layers[b->rc_ops[rc_next]].rc_step == s; rc_next++) {
                int j = b->rc_ops[rc_next];
                PUSH(VD_A_RECOMPUTE, j);
                st->recompute_s += b->prof->layers[j].algos[p->layers[j].algo].fwd_s;
            }
            PUSH(VD_A_COMPUTE, s);
            for (int t = head[4 * ns + s]; t >= 0; t = next[4 * cap + t]) PUSH(VD_A_OFFLOAD, t);
        }
        st->n_actions = na - st->first_action;
    }
#undef PUSH
    p->n_actions = na;
}

/* Sum statistics after placement. */
static void finish_stats(vd_plan *p) {
    p->live_peak = 0;
    p->peak_step = 0;
    p->hwm = 0;
    for (int s = 0; s <= p->n_steps; s++) { p->steps[s].mem_in_use = 0; p->steps[s].mem_top = 0; }
    for (int k = 0; k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        uint64_t top = iv->offset + iv->bytes;
        if (top > p->hwm) p->hwm = top;
        for (int s = iv->first; s <= iv->last; s++) {
            p->steps[s].mem_in_use += iv->bytes;
            if (top > p->steps[s].mem_top) p->steps[s].mem_top = top;
        }
    }
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].mem_in_use > p->live_peak) { p->live_peak = p->steps[s].mem_in_use; p->peak_step = s; }
    p->frag = p->hwm ? (double)(p->hwm - p->live_peak) / (double)p->hwm : 0.0;
    p->offload_bytes = p->prefetch_bytes = p->input_bytes = p->host_bytes = 0;
    p->recompute_bytes = 0;
    p->n_recomputed = p->n_recompute_ops = 0;
    p->recompute_s = 0;
    for (int s = 0; s < p->n_steps; s++) p->recompute_s += p->steps[s].recompute_s;
    for (int a = 0; a < p->n_actions; a++) p->n_recompute_ops += p->actions[a].kind == VD_A_RECOMPUTE;
    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        if (T->recompute) { p->recompute_bytes += T->bytes; p->n_recomputed++; }
        T->host_offset = 0;
        if (T->offload && !T->host_src) {
            T->host_offset = p->host_bytes;
            p->host_bytes += VD_ALIGN_UP(T->bytes, (uint64_t)VD_PLAN_ALIGN);
            p->offload_bytes += T->bytes;
        }
    }
    for (int k = 0; k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        const vd_tensor *T = &p->tensors[iv->tensor];
        if (iv->fill == VD_FILL_NONE) continue;
        if (T->offload && T->iv[1] == k) p->prefetch_bytes += T->bytes;   /* prefetch back */
        else if (p->t_stage >= 0 && iv->tensor == p->t_x) continue;        /* staged instead */
        else p->input_bytes += T->bytes;                                   /* x (or x:next), labels */
    }
    p->persistent_bytes = 0;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].persistent)
            p->persistent_bytes += p->intervals[p->tensors[t].iv[0]].bytes;
}

/* ---- input staging ------------------------------------------------------ */

typedef struct span { uint64_t o, e; } span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return (x->o > y->o) - (x->o < y->o);
}

/* Lowest 256-aligned offset for a region of `bytes` that overlaps none of the
 * first n intervals of p live at a step of [q, n_steps - 1] or at step 0 (the
 * staging region holds the next batch from its copy at q until the next
 * iteration's step 0 has read it); UINT64_MAX when it would end above limit.
 * sp: scratch [n]. */
static uint64_t stage_offset(const vd_plan *p, int n, int q, uint64_t bytes, uint64_t limit,
                             span *sp) {
    int m = 0;
    for (int k = 0; k < n; k++) {
        const vd_interval *iv = &p->intervals[k];
        if (iv->last >= q || iv->first <= 0)
            sp[m++] = (span){iv->offset, iv->offset + iv->bytes};
    }
    qsort(sp, (size_t)m, sizeof *sp, cmp_span);
    uint64_t cand = 0;
    for (int k = 0; k < m; k++) {
        if (cand + bytes <= sp[k].o) break;
        if (sp[k].e > cand) cand = sp[k].e;
    }
    return cand + bytes <= limit ? cand : UINT64_MAX;
}

/* Put the staging intervals of tensor t at issue step q (offset off; they are
 * the plan's last two intervals, after the first n0), rebuild the actions and
 * simulate. */
static int stage_try(bld *b, int t, int n0, int q, uint64_t off, vd_err *e) {
    vd_plan *p = b->p;
    vd_tensor *T = &p->tensors[t];
    p->n_intervals = n0;
    T->n_iv = 0;
    T->iv[0] = T->iv[1] = -1;
    int ka = add_interval(b, t, 0, 0, VD_FILL_NONE, 0);
    int kb = add_interval(b, t, q, p->n_steps - 1, VD_FILL_STAGE, p->n_steps);
    p->intervals[ka].offset = p->intervals[kb].offset = off;
    T->prod_step = q;
    p->stage_step = q;
    build_actions(b);
    return vdp_simulate(p, b->prof, false, NULL, NULL, NULL, e);
}

/* What stage_time needs besides the issue step. */
typedef struct stage_ctx {
    bld *b;
    int t, n0;
    uint64_t bytes, limit;
    span *sp;
} stage_ctx;

/* Predicted iteration with the staging copy issued at step q. */
static int stage_time(const stage_ctx *sc, int q, double *iter_s, vd_err *e) {
    const vd_plan *p = sc->b->p;
    uint64_t off = stage_offset(p, sc->n0, q, sc->bytes, sc->limit, sc->sp);
    int rc = stage_try(sc->b, sc->t, sc->n0, q, off, e);
    if (!rc) *iter_s = p->sim.iter_s;
    return rc;
}

/* The latest issue step in [lo, hi] whose predicted iteration is at most
 * target (binary search: the time only grows with the step there; lo is
 * taken as within it). */
static int stage_latest(const stage_ctx *sc, int lo, int hi, double target, int *q, vd_err *e) {
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        double t;
        int rc = stage_time(sc, mid, &t, e);
        if (rc) return rc;
        if (t <= target) lo = mid;
        else hi = mid - 1;
    }
    *q = lo;
    return VD_OK;
}

/* Input staging for a feasible training plan that is otherwise complete
 * (placed, actions built, simulated): the tensor "x:next" and its copy at
 * the step that costs least. Nothing else moves. The region must fit below
 * limit at the issue step q (which holds from some q_fit on: a later q
 * conflicts with fewer intervals). Preferably q is no earlier than the last
 * backward prefetch (the H2D stream serves copies in issue order: an earlier
 * copy delays it), the latest such step whose copy still ends when the
 * iteration does (the predicted time only grows with q from there); when
 * even the earliest of those is slower than issuing at q_fit, the latest
 * step before them as fast as q_fit (binary searches on the simulator).
 * Kept only if the iteration gets faster; p->stage says what happened. */
static int add_staging(bld *b, uint64_t limit, vd_err *e) {
    vd_plan *p = b->p;
    int L = b->L, last = p->n_steps - 1, n0 = p->n_intervals;
    const vd_tensor *X = &p->tensors[p->t_x];
    uint64_t bytes = iv_size(X->bytes);
    span *sp = malloc((size_t)(n0 > 0 ? n0 : 1) * sizeof *sp);
    if (!sp) return vd_errf(e, VD_ENOMEM, "out of memory planning the input staging");
    int rc = VD_OK;
    if (stage_offset(p, n0, last, bytes, limit, sp) == UINT64_MAX) {
        p->stage = VD_STAGE_NO_ROOM;
        goto out;
    }
    int q_fit = L;
    if (stage_offset(p, n0, L, bytes, limit, sp) == UINT64_MAX) {
        int lo = L, hi = last;                 /* !fits(lo), fits(hi) */
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if (stage_offset(p, n0, mid, bytes, limit, sp) == UINT64_MAX) lo = mid;
            else hi = mid;
        }
        q_fit = hi;
    }
    int q_pf = -1;
    for (int k = 0; k < n0; k++)
        if (p->intervals[k].fill != VD_FILL_NONE && p->intervals[k].first >= L &&
            p->intervals[k].first > q_pf)
            q_pf = p->intervals[k].first;
    int q_lo = q_fit > q_pf ? q_fit : q_pf;
    double base = p->sim.iter_s;
    int t = add_tensor(b, VD_T_INPUT, -1, X->bytes, "x", ":next");
    p->t_stage = t;
    stage_ctx sc = {b, t, n0, bytes, limit, sp};
    double t_lo, t_mid;
    int best_q;
    if ((rc = stage_time(&sc, q_lo, &t_lo, e)) ||
        (rc = stage_latest(&sc, q_lo, last, t_lo + 1e-12 + 1e-9 * t_lo, &best_q, e)))
        goto out;
    if (q_fit < q_lo) {
        /* ahead of the last prefetches (it queues before them): better only
         * when the copy issued after them cannot end in time; then the latest
         * such step that is as fast as the earliest */
        double t_fit;
        if ((rc = stage_time(&sc, q_fit, &t_fit, e))) goto out;
        if (t_fit < t_lo - 1e-12 - 1e-9 * t_lo &&
            (rc = stage_latest(&sc, q_fit, q_lo - 1, t_fit + 1e-12 + 1e-9 * t_fit, &best_q, e)))
            goto out;
    }
    if ((rc = stage_time(&sc, best_q, &t_mid, e))) goto out;
    if (t_mid < base) {
        finish_stats(p);
        p->stage = VD_STAGE_ON;
    } else {
        /* no faster: the plan as it was */
        p->n_tensors--;
        p->n_intervals = n0;
        p->t_stage = p->stage_step = -1;
        build_actions(b);
        rc = vdp_simulate(p, b->prof, false, NULL, NULL, NULL, e);
        p->stage = VD_STAGE_NO_GAIN;
    }
out:
    free(sp);
    return rc;
}

/* ---- prefetch scheduling ------------------------------------------------ */

/* Paper rule: consumer layer j is prefetched at the backward step of the
 * largest layer l > j such that layers j+1..l-1 contain no conv. */
static int paper_issue_step(const bld *b, int cons_step) {
    int L = b->L;
    int j = 2 * L - 1 - cons_step;          /* consumer layer */
    int l = j + 1;
    while (l + 1 <= L - 1 && b->net->layers[l].op != VD_OP_CONV) l++;
    if (l > L - 1) l = L - 1;
    /* window at layer l covers [conv below l, l-1]; layer l itself conv is fine */
    return bwd_step(L, l);
}

typedef struct pf_item { int t; int c; } pf_item;

static int cmp_pf_desc(const void *a, const void *bb) {
    const pf_item *x = a, *y = bb;
    if (x->c != y->c) return y->c - x->c;
    return y->t - x->t;
}

/* Choose prefetch steps. t_start: stall-free compute start time per step. */
static void schedule_prefetch(bld *b, const double *t_start, const double *d2h_done) {
    vd_plan *p = b->p;
    const vd_device_params *dev = &b->prof->dev;
    int n = 0;
    pf_item *items = (pf_item *)b->extra;   /* scratch, >= n_tensors ints*2? see alloc */
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].offload) { items[n].t = t; items[n].c = p->tensors[t].bwd_first; n++; }
    qsort(items, (size_t)n, sizeof *items, cmp_pf_desc);
    /* Ours: hold each offloaded region until its copy has drained (no
     * compute stall), as long as that is before its first backward use;
     * fit_memory pulls releases back earlier when memory is short. */
    if (b->variant == 0 && d2h_done)
        for (int k = 0; k < n; k++) {
            vd_tensor *T = &p->tensors[items[k].t];
            if (T->host_src) continue;
            for (int s = T->fwd_last + 1; s < T->bwd_first - 1; s++)
                if (t_start[s] >= d2h_done[items[k].t]) { T->release_step = s; break; }
        }
    double next_start = DBL_MAX;
    int next_q = p->n_steps;
    for (int k = 0; k < n; k++) {
        vd_tensor *T = &p->tensors[items[k].t];
        int c = T->bwd_first, r = T->release_step;
        int q;
        if (b->variant == 2) {
            q = paper_issue_step(b, c);
        } else {
            double dur = (double)T->bytes / dev->h2d_bw + dev->launch_s;
            double deadline = t_start[c] < next_start ? t_start[c] : next_start;
            double start = deadline - dur;
            q = -1;
            for (int s = c; s >= r; s--) {
                double avail = t_start[s];
                if (!T->host_src && d2h_done && d2h_done[items[k].t] > avail) avail = d2h_done[items[k].t];
                if (avail <= start + 1e-12) { q = s; break; }
            }
            if (q < 0) q = r;
            if (q > next_q) q = next_q;       /* H2D issue order follows consumer order */
            next_start = start;
        }
        if (q < r) q = r;
        if (q > c) q = c;
        T->prefetch_step = q;
        if (q < next_q) next_q = q;
    }
}

/* Subtract `bytes` from mem[a..b]. */
static void mem_sub(uint64_t *mem, int a, int b, uint64_t bytes) {
    for (int s = a; s <= b; s++) mem[s] -= bytes;
}

/* Make every step's live bytes fit cap: release held regions earlier and
 * issue prefetches later. Works on the tensors' steps with an incremental
 * memory count (moves only ever lower it), then rebuilds the intervals.
 * Returns true if every step fits. */
static bool fit_memory(bld *b, uint64_t cap, uint64_t *mem) {
    vd_plan *p = b->p;
    build_intervals(b);
    mem_per_step(p, mem);
    bool ok = true;
    int over = 0;
    /* only offloaded tensors move: scan just those */
    int *off = (int *)b->fwd_write + b->cap_t;   /* scratch after fwd_write, see alloc */
    int n_off = 0;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].offload) off[n_off++] = t;
    for (;;) {
        while (over < p->n_steps && mem[over] <= cap) over++;
        if (over >= p->n_steps) break;
        /* Regions held after their last forward use (waiting for the copy to
         * drain): release the one held longest at `over` (accept a stall). */
        int rel = -1;
        for (int k = 0; k < n_off; k++) {
            int t = off[k];
            const vd_tensor *T = &p->tensors[t];
            if (T->host_src) continue;
            if (T->fwd_last < over && over <= T->release_step - 1 &&
                (rel < 0 || T->release_step > p->tensors[rel].release_step))
                rel = t;
        }
        if (rel >= 0) {
            vd_tensor *T = &p->tensors[rel];
            uint64_t sz = iv_size(T->bytes);
            int nr = over > T->fwd_last + 1 ? over : T->fwd_last + 1;
            mem_sub(mem, nr, T->release_step - 1, sz);
            T->release_step = nr;
            continue;
        }
        /* Early prefetches covering `over`: the one with the latest consumer waits. */
        int best = -1;
        for (int k = 0; k < n_off; k++) {
            int t = off[k];
            const vd_tensor *T = &p->tensors[t];
            if (T->prefetch_step > over || T->bwd_first <= over) continue;
            if (best < 0 || T->bwd_first > p->tensors[best].bwd_first) best = t;
        }
        if (best < 0) { ok = false; break; }
        vd_tensor *T = &p->tensors[best];
        uint64_t sz = iv_size(T->bytes);
        mem_sub(mem, T->prefetch_step, over, sz);
        T->prefetch_step = over + 1;
    }
    build_intervals(b);
    return ok;
}

/* ---- one build with fixed policy and algorithms ------------------------- */

static void plan_release(vd_plan *p) {
    if (!p) return;
    free(p->tensors);
    free(p->intervals);
    free(p->actions);
    free(p->steps);
    free(p->layers);
    if (p->eval) { plan_release(p->eval); free(p->eval); }
    memset(p, 0, sizeof *p);
}

void vd_plan_free(vd_plan *p) { plan_release(p); }

static int find_loss(const vd_net *net, vd_err *e) {
    int loss = -1;
    for (int i = 0; i < net->n_layers; i++)
        if (net->layers[i].op == VD_OP_SOFTMAX_XENT) {
            if (loss >= 0)
                return -1 - vd_errf(e, VD_EUNSUPPORTED, "net '%s' has more than one loss layer "
                                    "('%s' and '%s'); vdnn plans exactly one, the last layer",
                                    net->name, net->layers[loss].name, net->layers[i].name);
            loss = i;
        }
    if (loss < 0)
        return -1 - vd_errf(e, VD_ESPEC, "net '%s' has no softmax_cross_entropy layer; "
                            "training needs one as the last layer", net->name);
    if (loss != net->n_layers - 1)
        return -1 - vd_errf(e, VD_EUNSUPPORTED, "loss layer '%s' must be the last layer of net '%s'",
                            net->layers[loss].name, net->name);
    for (int i = 0; i < net->n_layers - 1; i++)
        if (n_consumers(net, i) == 0)
            return -1 - vd_errf(e, VD_EUNSUPPORTED, "layer '%s' of net '%s' feeds no other layer; "
                                "every layer except the loss must be used",
                                net->layers[i].name, net->name);
    return loss;
}

static int build_fixed(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       vd_policy offload_pol, const int *algos, const vd_plan *pin,
                       vd_plan *out, vd_err *e);

static int build_eval(const vd_net *net, const vd_profile *prof, const vd_plan *train,
                      vd_err *e) {
    vd_plan_opts o = {0};
    vd_plan_opts_init(&o);
    o.batch = train->batch;
    o.policy = VD_POLICY_NONE;
    o.budget = train->budget;
    o.forward_only = true;
    int L = net->n_layers;
    int *algos = malloc(2 * (size_t)L * sizeof *algos);   /* [fwd L | bwd L] */
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    for (int i = 0; i < L; i++) algos[i] = algos[L + i] = train->layers[i].algo;
    vd_plan *ev = calloc(1, sizeof *ev);
    if (!ev) { free(algos); return vd_errf(e, VD_ENOMEM, "out of memory"); }
    int rc = build_fixed(net, prof, &o, VD_POLICY_NONE, algos, train, ev, e);
    if (rc == VD_EBUDGET) {
        /* Retry with the smallest workspaces before giving up. */
        for (int i = 0; i < net->n_layers; i++) {
            int best = 0;
            for (int k = 1; k < prof->layers[i].n_algos; k++)
                if (vd_profile_algo_ws(&prof->layers[i].algos[k], false) <
                    vd_profile_algo_ws(&prof->layers[i].algos[best], false)) best = k;
            algos[i] = algos[L + i] = best;
        }
        plan_release(ev);
        rc = build_fixed(net, prof, &o, VD_POLICY_NONE, algos, train, ev, e);
        if (rc == VD_EBUDGET)
            vd_err_prefix(e, "the evaluation (forward-only) placement does not fit");
    }
    free(algos);
    if (rc != VD_OK && rc != VD_EBUDGET) { plan_release(ev); free(ev); return rc; }
    if (rc == VD_EBUDGET) { plan_release(ev); free(ev); return rc; }
    ((vd_plan *)train)->eval = ev;
    return VD_OK;
}

static int build_mode(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                      vd_policy offload_pol, const int *algos, const vd_plan *pin,
                      int variant, bool alias, bool *live_fit, vd_plan *out, vd_err *e);

/* --prefetch auto: three candidate schedules, simulated; the fastest that
 * fits wins (or, if none fits, the one that overshoots least):
 *   0  ours: regions held until their offload drained (no forward stall)
 *      while memory allows, prefetches as late as still hides the copy
 *      (H2D queueing included), offloads that save nothing dropped;
 *   1  the same prefetch rule with releases right after the last forward
 *      use and every offload kept (least memory);
 *   2  the paper's prefetch rule.
 * --prefetch paper: variant 2 only. */
static int build_variants(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                          vd_policy offload_pol, const int *algos, const vd_plan *pin,
                          bool alias, bool *live_fit, vd_plan *out, vd_err *e) {
    /* per-tensor requests may offload (a RECOMPUTE that cannot be honoured too) */
    bool disp_offload = false;
    for (int i = 0; opts->disp && i <= net->n_layers; i++)
        disp_offload |= opts->disp[i] == VD_DISP_OFFLOAD || opts->disp[i] == VD_DISP_RECOMPUTE;
    bool no_offload = (offload_pol == VD_POLICY_NONE || offload_pol == VD_POLICY_AUTO) && !disp_offload;
    if (opts->prefetch == VD_PREFETCH_PAPER || no_offload || opts->forward_only)
        return build_mode(net, prof, opts, offload_pol, algos, pin,
                          opts->prefetch == VD_PREFETCH_PAPER ? 2 : 0, alias, live_fit, out, e);
    int best_rc = -1;
    memset(out, 0, sizeof *out);
    *live_fit = false;
    for (int v = 0; v < 3; v++) {
        vd_plan alt;
        vd_err te = {0};
        bool lf = false;
        int rc = build_mode(net, prof, opts, offload_pol, algos, pin, v, alias, &lf, &alt, &te);
        *live_fit |= lf;
        if (rc != VD_OK && rc != VD_EBUDGET) {
            if (best_rc >= 0) plan_release(out);
            *e = te;
            return rc;
        }
        bool better;
        if (best_rc < 0) better = true;
        else if (rc == VD_OK && best_rc != VD_OK) better = true;
        else if (rc != VD_OK && best_rc == VD_OK) better = false;
        else if (rc == VD_OK) better = alt.sim.iter_s < out->sim.iter_s;
        else better = alt.hwm < out->hwm;
        if (better) {
            if (best_rc >= 0) plan_release(out);
            *out = alt;
            best_rc = rc;
            if (rc) *e = te;
        } else {
            plan_release(&alt);
        }
    }
    out->prefetch = opts->prefetch;
    return best_rc;
}

/* Does plan p alias an add's input gradient (an input with no dx)? */
static bool has_grad_alias(const vd_plan *p, const vd_net *net) {
    for (int i = 0; i < p->n_layers && !p->forward_only; i++)
        for (int k = 0; k < net->layers[i].n_in; k++)
            if (net->layers[i].in[k] >= 0 && p->layers[i].dx[k] < 0) return true;
    return false;
}

/* build_variants with the adds' gradient aliasing. Sharing one tensor never
 * raises the bytes live at a step, but its region spans what were two (the
 * add's dy and its input's gradient), which the placement may pack worse.
 * So when the placement is what fails (the live bytes fit the budget, the
 * high-water mark does not) or, without a budget, what sets the need above
 * the live peak, the plan is built again without the aliasing (as before
 * it), and that one is taken if it fits (needs less). */
static int build_fixed(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       vd_policy offload_pol, const int *algos, const vd_plan *pin,
                       vd_plan *out, vd_err *e) {
    bool live_fit = false;
    int rc = build_variants(net, prof, opts, offload_pol, algos, pin, true, &live_fit, out, e);
    bool retry = rc == VD_EBUDGET ? live_fit
               : rc == VD_OK && !opts->budget && out->hwm > out->live_peak;
    if (!retry || !has_grad_alias(out, net)) return rc;
    vd_plan alt;
    vd_err te = {0};
    int rc2 = build_variants(net, prof, opts, offload_pol, algos, pin, false, &live_fit, &alt, &te);
    if (rc2 == VD_OK && (rc == VD_EBUDGET || alt.hwm < out->hwm)) {
        plan_release(out);
        *out = alt;
        return VD_OK;
    }
    if (rc2 == VD_OK || rc2 == VD_EBUDGET) plan_release(&alt);
    return rc;   /* the aliased plan's outcome (another error of the retry: ignored) */
}

static int build_mode(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                      vd_policy offload_pol, const int *algos, const vd_plan *pin,
                      int variant, bool alias, bool *live_fit, vd_plan *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    *live_fit = false;
    int L = net->n_layers;
    bld B = {0};
    B.net = net; B.prof = prof; B.opts = opts; B.p = out; B.L = L; B.variant = variant;
    B.alias = alias;
    B.disp = opts->forward_only ? NULL : opts->disp;
    vd_plan *p = out;
    snprintf(p->net, sizeof p->net, "%s", net->name);
    p->policy = opts->policy;
    p->offload_policy = offload_pol;
    p->prefetch = opts->prefetch;
    p->batch = opts->batch;
    p->n_layers = L;
    p->forward_only = opts->forward_only;
    p->n_steps = opts->forward_only ? L : 2 * L + 1;
    p->loss_layer = L - 1;
    p->t_stage = p->stage_step = -1;
    p->stage = opts->forward_only ? VD_STAGE_NA : opts->no_stage_input ? VD_STAGE_OFF : VD_STAGE_NA;
    int cap_t = 6 + 6 * L;     /* params, momentum, grads, x, labels, x:next; per layer:
                                  y, dy, aux, ws_fwd, ws_bwd, ws_rc */
    int cap_iv = 2 * cap_t;
    int cap_a = 4 * cap_iv + 2 * cap_t + 2 * (p->n_steps + 1) + L + 8;
    p->tensors = calloc((size_t)cap_t, sizeof *p->tensors);
    p->intervals = calloc((size_t)cap_iv, sizeof *p->intervals);
    p->actions = calloc((size_t)cap_a, sizeof *p->actions);
    p->steps = calloc((size_t)p->n_steps + 1, sizeof *p->steps);
    p->layers = calloc((size_t)L, sizeof *p->layers);
    B.act_of = malloc((size_t)L * sizeof(int));
    B.dact_of = malloc((size_t)L * sizeof(int));
    B.fwd_write = malloc((size_t)cap_t * 2 * sizeof(int));   /* + fit_memory scratch */
    B.cap_t = cap_t;
    B.first_touch = malloc((size_t)cap_t * sizeof(int));
    B.last_touch = malloc((size_t)cap_t * sizeof(int));
    /* scratch: inplace flags (L bools as ints), later pf_item[cap_t] */
    size_t scratch = (size_t)(cap_t > L ? cap_t : L) * sizeof(pf_item);
    B.extra = malloc(scratch);
    B.cap_iv = cap_iv;
    B.bucket_head = malloc((size_t)5 * ((size_t)p->n_steps + 1) * sizeof(int));
    B.bucket_next = malloc((size_t)5 * (size_t)(cap_iv > cap_t ? cap_iv : cap_t) * sizeof(int));
    uint64_t *mem = malloc(((size_t)p->n_steps + 1) * sizeof *mem);
    double *t_start = malloc(((size_t)p->n_steps + 1) * sizeof *t_start);
    double *d2h = malloc((size_t)cap_t * sizeof *d2h);
    bool *pinned = calloc((size_t)cap_iv, sizeof *pinned);
    bool *ipf = malloc((size_t)(L > 0 ? L : 1) * sizeof *ipf);
    B.rc_ops = malloc((size_t)(L > 0 ? L : 1) * sizeof *B.rc_ops);
    int rc = VD_OK;
    if (!p->tensors || !p->intervals || !p->actions || !p->steps || !p->layers || !B.act_of ||
        !B.dact_of || !B.fwd_write || !B.first_touch || !B.last_touch || !B.extra || !B.bucket_head || !B.bucket_next || !mem ||
        !t_start || !d2h || !pinned || !ipf || !B.rc_ops) {
        rc = vd_errf(e, VD_ENOMEM, "out of memory building the plan");
        goto done;
    }
    vd_schedule_inplace_flags(net, ipf);
    for (int i = 0; i < L; i++) B.extra[i] = ipf[i];
    for (int s = 0; s < p->n_steps; s++) {
        vd_step *st = &p->steps[s];
        if (s < L) { st->kind = VD_STEP_FWD; st->layer = s;
                     st->compute_s = prof->layers[s].algos[algos[s]].fwd_s; }
        else if (s < 2 * L) { st->kind = VD_STEP_BWD; st->layer = 2 * L - 1 - s;
                              st->compute_s = prof->layers[st->layer].algos[algos[L + st->layer]].bwd_s; }
        else { st->kind = VD_STEP_SGD; st->layer = -1; st->compute_s = prof->sgd_s; }
    }
    p->steps[p->n_steps].kind = VD_STEP_END;
    p->steps[p->n_steps].layer = -1;

    rc = build_tensors(&B, algos, e);
    if (rc) goto done;
    /* An ADD's backward copies dy only into the gradients of the inputs
     * that do not share its tensor (alias_add_grads): its profiled time (the
     * profile times every input's copy) counts for the share it still
     * writes; none when all share. */
    for (int i = 0; i < L && !p->forward_only; i++) {
        const vd_layer *l = &net->layers[i];
        if (l->op != VD_OP_ADD) continue;
        int want = 0, have = 0;
        for (int k = 0; k < l->n_in; k++)
            if (l->in[k] >= 0) { want++; have += p->layers[i].dx[k] >= 0; }
        if (want) p->steps[bwd_step(L, i)].compute_s *= (double)have / want;
    }
    decide_recompute(&B);

    /* Offload decisions (release as early as possible: the paper's rule). */
    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        if (!want_offload(&B, t, offload_pol)) continue;
        T->offload = true;
        T->host_src = T->kind == VD_T_INPUT;
        T->offload_step = B.fwd_write[t] >= 0 ? B.fwd_write[t] : T->prod_step;
        T->release_step = T->fwd_last + 1;
        T->prefetch_step = T->bwd_first;
    }

    /* Stall-free timeline with just-in-time prefetches, then schedule. */
    bool any_offload = false;
    for (int t = 0; t < p->n_tensors; t++) any_offload |= p->tensors[t].offload;
    if (any_offload) {
        build_intervals(&B);
        build_actions(&B);
        rc = vdp_simulate(p, prof, true, d2h, NULL, NULL, e);
        if (rc) goto done;
        /* when each step's compute-stream work (recomputes, then the op) begins */
        for (int s = 0; s <= p->n_steps; s++) t_start[s] = p->steps[s].t_rc_start;
        schedule_prefetch(&B, t_start, d2h);
    }

    /* Memory: delay prefetches until the live bytes fit, then place; if the
     * placement overshoots (fragmentation), tighten the cap and retry. */
    uint64_t budget = opts->budget;
    uint64_t cap = budget ? budget : UINT64_MAX;
    int *saved_q = NULL, *saved_r = NULL;
    if (any_offload) {
        saved_q = malloc((size_t)p->n_tensors * sizeof *saved_q);
        if (!saved_q) { rc = vd_errf(e, VD_ENOMEM, "out of memory"); goto done; }
        for (int t = 0; t < p->n_tensors; t++) saved_q[t] = p->tensors[t].prefetch_step;
        saved_r = malloc((size_t)p->n_tensors * sizeof *saved_r);
        if (!saved_r) { free(saved_q); rc = vd_errf(e, VD_ENOMEM, "out of memory"); goto done; }
        for (int t = 0; t < p->n_tensors; t++) saved_r[t] = p->tensors[t].release_step;
    }
    uint64_t hwm = 0;
    for (int attempt = 0; attempt < 12; attempt++) {
        if (saved_q)
            for (int t = 0; t < p->n_tensors; t++) {
                p->tensors[t].prefetch_step = saved_q[t];
                p->tensors[t].release_step = saved_r[t];
                p->tensors[t].offload = p->tensors[t].release_step >= 0;
            }
        bool fits_cap = true;
        if (any_offload) {
            fits_cap = fit_memory(&B, cap, mem);
            /* An offload whose prefetch is issued when its region is released
             * saves nothing: keep the tensor resident instead (same memory,
             * no copies). */
            bool changed = false;
            for (int t = 0; t < p->n_tensors && variant == 0; t++) {
                vd_tensor *T = &p->tensors[t];
                if (T->offload && T->prefetch_step <= T->release_step) { T->offload = false; changed = true; }
            }
            if (changed) build_intervals(&B);
        } else {
            build_intervals(&B);
        }
        /* Pin persistent regions to the reference plan's offsets (eval). */
        for (int k = 0; k < p->n_intervals; k++) pinned[k] = false;
        if (pin) {
            for (int t = 0; t < p->n_tensors; t++) {
                const vd_tensor *T = &p->tensors[t];
                if (!T->persistent) continue;
                int pt = T->kind == VD_T_PARAMS ? pin->t_params
                       : T->kind == VD_T_MOMENTUM ? pin->t_mom : pin->t_grads;
                if (pt < 0) continue;
                p->intervals[T->iv[0]].offset = pin->intervals[pin->tensors[pt].iv[0]].offset;
                pinned[T->iv[0]] = true;
            }
        }
        if (attempt == 0 && budget) {
            /* the live bytes fit the budget (whether the placement does or not) */
            uint64_t live = 0;
            mem_per_step(p, mem);
            for (int s = 0; s < p->n_steps; s++) if (mem[s] > live) live = mem[s];
            *live_fit = live <= budget;
        }
        /* live bytes over the budget: infeasible whatever the placement */
        rc = vdp_place(p->intervals, p->n_intervals, pinned, budget && !fits_cap && cap == budget,
                       &hwm, e);
        if (rc) goto done;
        if (!budget || hwm <= budget) break;
        /* the live bytes alone exceed the budget: no tighter cap can help */
        if (!fits_cap && cap == budget) break;
        uint64_t over = hwm - budget;
        uint64_t live = 0;
        mem_per_step(p, mem);
        for (int s = 0; s < p->n_steps; s++) if (mem[s] > live) live = mem[s];
        uint64_t newcap = live > over + VD_PLAN_ALIGN ? live - over - VD_PLAN_ALIGN : 0;
        if (!any_offload || newcap >= cap) break;
        cap = newcap;
    }
    free(saved_q);
    free(saved_r);

    build_actions(&B);
    finish_stats(p);
    p->budget = budget ? budget : p->hwm;
    p->feasible = p->hwm <= p->budget;
    rc = vdp_simulate(p, prof, false, NULL, NULL, NULL, e);
    if (rc) goto done;
    if (!p->feasible) rc = VD_EBUDGET;
    else if (!p->forward_only && !opts->no_stage_input)
        rc = add_staging(&B, budget ? budget : p->hwm, e);

done:
    free(B.act_of); free(B.dact_of); free(B.fwd_write); free(B.first_touch);
    free(B.last_touch); free(B.extra); free(B.bucket_head); free(B.bucket_next); free(mem); free(t_start); free(d2h); free(pinned);
    free(B.rc_ops);
    free(ipf);
    if (rc != VD_OK && rc != VD_EBUDGET) plan_release(out);
    return rc;
}

/* ---- policy front end --------------------------------------------------- */

static int check_inputs(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        vd_err *e) {
    if (!opts || opts->batch <= 0)
        return vd_errf(e, VD_EUSAGE, "plan: batch must be positive");
    if ((unsigned)opts->policy >= VD_POLICY_COUNT)
        return vd_errf(e, VD_EUSAGE, "plan: unknown policy %d", (int)opts->policy);
    if (net->n_layers <= 0)
        return vd_errf(e, VD_ESPEC, "net '%s' has no layers", net->name);
    if (!prof || prof->n_layers != net->n_layers)
        return vd_errf(e, VD_EDATA, "profile has %d layers but net '%s' has %d",
                       prof ? prof->n_layers : 0, net->name, net->n_layers);
    for (int i = 0; i < net->n_layers; i++) {
        if (prof->layers[i].n_algos <= 0 || prof->layers[i].n_algos > VD_PROFILE_MAX_ALGOS)
            return vd_errf(e, VD_EDATA, "profile layer '%s' has %d algorithm options",
                           prof->layers[i].name, prof->layers[i].n_algos);
        if (opts->algos && (opts->algos[i] < 0 || opts->algos[i] >= prof->layers[i].n_algos))
            return vd_errf(e, VD_EUSAGE, "algorithm %d of layer '%s' out of range (0..%d)",
                           opts->algos[i], net->layers[i].name, prof->layers[i].n_algos - 1);
        if (opts->algos_bwd && (opts->algos_bwd[i] < 0 || opts->algos_bwd[i] >= prof->layers[i].n_algos))
            return vd_errf(e, VD_EUSAGE, "backward algorithm %d of layer '%s' out of range (0..%d)",
                           opts->algos_bwd[i], net->layers[i].name, prof->layers[i].n_algos - 1);
    }
    int loss = find_loss(net, e);
    if (loss < 0) return -1 - loss;
    if (opts->disp) {
        bool *ip = malloc((size_t)net->n_layers * sizeof *ip);
        if (!ip) return vd_errf(e, VD_ENOMEM, "out of memory");
        vd_schedule_inplace_flags(net, ip);
        int rc = VD_OK;
        for (int i = 0; i <= net->n_layers && !rc; i++) {
            const char *who = i ? net->layers[i - 1].name : "the net input";
            if ((unsigned)opts->disp[i] >= VD_DISP_COUNT)
                rc = vd_errf(e, VD_EUSAGE, "disposition %d of %s out of range", (int)opts->disp[i], who);
            else if (i && ip[i - 1] && opts->disp[i] != VD_DISP_AUTO)
                rc = vd_errf(e, VD_EUSAGE, "layer '%s' runs in place (its output is its producer's "
                             "tensor): give its disposition to the producer", who);
        }
        free(ip);
        if (rc) return rc;
    }
    return VD_OK;
}

static int fastest_algo(const vd_profile_layer *pl) {
    int best = 0;
    for (int k = 1; k < pl->n_algos; k++)
        if (pl->algos[k].fwd_s + pl->algos[k].bwd_s < pl->algos[best].fwd_s + pl->algos[best].bwd_s)
            best = k;
    return best;
}

/* Per pass: fastest for that pass (ties: less workspace, then lower index). */
static int fastest_pass(const vd_profile_layer *pl, bool bwd) {
    int best = 0;
    for (int k = 1; k < pl->n_algos; k++) {
        const vd_profile_algo *a = &pl->algos[k], *b = &pl->algos[best];
        double ta = bwd ? a->bwd_s : a->fwd_s, tb = bwd ? b->bwd_s : b->fwd_s;
        if (ta < tb || (ta == tb && vd_profile_algo_ws(a, bwd) < vd_profile_algo_ws(b, bwd)))
            best = k;
    }
    return best;
}

/* Per pass: least workspace for that pass (ties: faster in that pass). */
static int minws_pass(const vd_profile_layer *pl, bool bwd) {
    int best = 0;
    for (int k = 1; k < pl->n_algos; k++) {
        const vd_profile_algo *a = &pl->algos[k], *b = &pl->algos[best];
        uint64_t wa = vd_profile_algo_ws(a, bwd), wb = vd_profile_algo_ws(b, bwd);
        double ta = bwd ? a->bwd_s : a->fwd_s, tb = bwd ? b->bwd_s : b->fwd_s;
        if (wa < wb || (wa == wb && ta < tb)) best = k;
    }
    return best;
}

static int minws_algo(const vd_profile_layer *pl) {
    int best = 0;
    for (int k = 1; k < pl->n_algos; k++) {
        const vd_profile_algo *a = &pl->algos[k], *b = &pl->algos[best];
        if (a->workspace < b->workspace ||
            (a->workspace == b->workspace && a->fwd_s + a->bwd_s < b->fwd_s + b->bwd_s))
            best = k;
    }
    return best;
}

/* Trial build: returns 0 feasible, VD_EBUDGET infeasible (plan kept in out
 * either way unless another error). */
static int trial(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                 vd_policy pol, const int *algos, vd_plan *out, vd_err *e) {
    return build_fixed(net, prof, opts, pol, algos, NULL, out, e);
}

/* The paper's vDNN_dyn search. */
static int build_dyn(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                     vd_plan *out, vd_err *e) {
    int L = net->n_layers;
    int *algos = malloc(2 * (size_t)L * sizeof *algos);   /* [fwd L | bwd L], equal halves */
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    for (int i = 0; i < L; i++) algos[i] = algos[L + i] = fastest_algo(&prof->layers[i]);
    static const vd_policy order[3] = {VD_POLICY_NONE, VD_POLICY_CONV, VD_POLICY_ALL};
    int rc = VD_EBUDGET;
    for (int k = 0; k < 3; k++) {
        rc = trial(net, prof, opts, order[k], algos, out, e);
        if (rc != VD_EBUDGET) { free(algos); return rc; }
        plan_release(out);
    }
    /* All offloaded, least workspace everywhere. */
    for (int i = 0; i < L; i++) algos[i] = algos[L + i] = minws_algo(&prof->layers[i]);
    rc = trial(net, prof, opts, VD_POLICY_ALL, algos, out, e);
    if (rc != VD_OK) { free(algos); return rc; }
    /* Greedy per layer: the fastest option that still fits. */
    for (int i = 0; i < L; i++) {
        const vd_profile_layer *pl = &prof->layers[i];
        if (pl->n_algos < 2) continue;
        int cur = algos[i];
        double cur_t = pl->algos[cur].fwd_s + pl->algos[cur].bwd_s;
        /* candidates sorted by time ascending */
        int idx[VD_PROFILE_MAX_ALGOS];
        int n = 0;
        for (int k = 0; k < pl->n_algos; k++)
            if (pl->algos[k].fwd_s + pl->algos[k].bwd_s < cur_t) idx[n++] = k;
        for (int a = 0; a < n; a++)
            for (int c = a + 1; c < n; c++) {
                double ta = pl->algos[idx[a]].fwd_s + pl->algos[idx[a]].bwd_s;
                double tc = pl->algos[idx[c]].fwd_s + pl->algos[idx[c]].bwd_s;
                if (tc < ta) { int tmp = idx[a]; idx[a] = idx[c]; idx[c] = tmp; }
            }
        for (int a = 0; a < n; a++) {
            algos[i] = algos[L + i] = idx[a];
            vd_plan tp;
            vd_err te = {0};
            int r2 = trial(net, prof, opts, VD_POLICY_ALL, algos, &tp, &te);
            if (r2 == VD_OK) { plan_release(out); *out = tp; cur = idx[a]; break; }
            if (r2 == VD_EBUDGET) plan_release(&tp);
            else { free(algos); *e = te; return r2; }
            algos[i] = algos[L + i] = cur;
        }
        algos[i] = algos[L + i] = cur;
    }
    free(algos);
    return VD_OK;
}

static int build_any(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                     vd_plan *out, vd_err *e) {
    int L = net->n_layers;
    if (opts->policy == VD_POLICY_DYN && !opts->algos && !opts->algos_bwd)
        return build_dyn(net, prof, opts, out, e);
    if (opts->policy == VD_POLICY_AUTO && !opts->forward_only)
        return vdp_build_auto(net, prof, opts, false, out, e);
    int *algos = malloc(2 * (size_t)L * sizeof *algos);   /* [fwd L | bwd L] */
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    vdp_opts_algos(prof, opts, L, algos);
    vd_policy pol = opts->policy == VD_POLICY_DYN ? VD_POLICY_ALL : opts->policy;
    int rc = build_fixed(net, prof, opts, pol, algos, NULL, out, e);
    free(algos);
    return rc;
}

static int min_budget_search(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                             uint64_t *min_budget, vd_err *e);

int vd_plan_min_budget(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       uint64_t *min_budget, vd_err *e) {
    int rc = check_inputs(net, prof, opts, e);
    if (rc) return rc;
    if (opts->policy == VD_POLICY_AUTO && !opts->forward_only)
        return vdp_min_budget_auto(net, prof, opts, min_budget, e);
    if (opts->policy != VD_POLICY_DYN || opts->algos || opts->algos_bwd)
        return min_budget_search(net, prof, opts, min_budget, e);
    /* dyn fits a budget when one of its candidates does: none, conv, all with
     * the fastest algorithms, all with the least workspace. Its minimum is
     * the smallest of theirs (checked with a dyn build; binary search up to
     * the largest of theirs if the heuristics disagree). */
    int L = net->n_layers;
    int *algos = malloc((size_t)L * sizeof *algos);
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    static const vd_policy cand[4] = {VD_POLICY_NONE, VD_POLICY_CONV, VD_POLICY_ALL, VD_POLICY_ALL};
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int k = 0; k < 4 && !rc; k++) {
        for (int i = 0; i < L; i++)
            algos[i] = k < 3 ? fastest_algo(&prof->layers[i]) : minws_algo(&prof->layers[i]);
        vd_plan_opts o = *opts;
        o.policy = cand[k];
        o.algos = algos;
        o.algos_bwd = NULL;
        uint64_t m = 0;
        rc = min_budget_search(net, prof, &o, &m, e);
        if (!rc) { if (m < lo) lo = m; if (m > hi) hi = m; }
    }
    free(algos);
    if (rc) return rc;
    vd_plan_opts o = *opts;
    o.budget = lo;
    vd_plan p;
    vd_err te = {0};
    rc = build_any(net, prof, &o, &p, &te);
    if (rc == VD_OK || rc == VD_EBUDGET) plan_release(&p);
    if (rc == VD_OK) { *min_budget = lo; return VD_OK; }
    if (rc != VD_EBUDGET) { *e = te; return rc; }
    while (hi - lo > VD_PLAN_ALIGN) {
        uint64_t mid = (lo + (hi - lo) / 2) / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        if (mid <= lo) mid = lo + VD_PLAN_ALIGN;
        o.budget = mid;
        rc = build_any(net, prof, &o, &p, &te);
        if (rc == VD_OK || rc == VD_EBUDGET) plan_release(&p);
        if (rc == VD_OK) hi = mid;
        else if (rc == VD_EBUDGET) lo = mid;
        else { *e = te; return rc; }
    }
    *min_budget = hi;
    return VD_OK;
}

static int min_budget_search(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                             uint64_t *min_budget, vd_err *e) {
    int rc;
    vd_plan_opts o = *opts;
    o.budget = 0;
    vd_plan p;
    rc = build_any(net, prof, &o, &p, e);
    if (rc) return rc;
    uint64_t hi = p.hwm;
    /* Nothing can be offloaded or recomputed: the need does not depend on
     * the budget. Whether the unbounded plan offloads does not tell: with
     * memory to spare it drops offloads that save nothing (prefetch issued
     * at the release), which a tighter budget keeps. */
    bool any = false;
    for (int t = 0; t < p.n_tensors; t++) any |= p.tensors[t].offload || p.tensors[t].recompute;
    any |= o.policy == VD_POLICY_ALL || o.policy == VD_POLICY_CONV;
    for (int i = 0; o.disp && i <= net->n_layers; i++)
        any |= o.disp[i] == VD_DISP_OFFLOAD || o.disp[i] == VD_DISP_RECOMPUTE;
    bool search = any || o.policy == VD_POLICY_DYN;
    uint64_t lo = p.persistent_bytes;   /* infeasible below this for sure */
    plan_release(&p);
    if (!search) { *min_budget = hi; return VD_OK; }
    lo = lo > VD_PLAN_ALIGN ? lo - VD_PLAN_ALIGN : 0;
    lo = lo / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
    while (hi - lo > VD_PLAN_ALIGN) {
        uint64_t mid = lo + (hi - lo) / 2;
        mid = mid / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        if (mid <= lo) mid = lo + VD_PLAN_ALIGN;
        o.budget = mid;
        vd_err te = {0};
        rc = build_any(net, prof, &o, &p, &te);
        if (rc == VD_OK) { hi = mid; plan_release(&p); }
        else if (rc == VD_EBUDGET) { lo = mid; plan_release(&p); }
        else { *e = te; return rc; }
    }
    *min_budget = hi;
    return VD_OK;
}

const char *vd_plan_step_label(const vd_plan *p, const vd_net *net, int s, char *buf, size_t n) {
    if (s < 0 || s > p->n_steps) snprintf(buf, n, "?");
    else if (s == p->n_steps) snprintf(buf, n, "end");
    else if (p->steps[s].kind == VD_STEP_SGD) snprintf(buf, n, "sgd");
    else snprintf(buf, n, "%s %s", p->steps[s].kind == VD_STEP_FWD ? "fwd" : "bwd",
                  net->layers[p->steps[s].layer].name);
    return buf;
}

static void explain_infeasible(const vd_net *net, const vd_profile *prof,
                               const vd_plan_opts *opts, vd_plan *p, vd_err *e) {
    char b1[32], b2[32], b3[32], b4[32], lab[160];
    int bad = -1;
    if (p->live_peak > p->budget) bad = p->peak_step;   /* live bytes alone do not fit */
    else
        for (int s = 0; s < p->n_steps; s++)
            if (p->steps[s].mem_top > p->budget) { bad = s; break; }
    if (bad < 0) bad = p->peak_step;
    const vd_step *st = &p->steps[bad];
    uint64_t need = st->mem_top;
    uint64_t minb = 0;
    vd_err te = {0};
    int rc = vd_plan_min_budget(net, prof, opts, &minb, &te);
    char minmsg[96];
    if (rc == VD_OK)
        snprintf(minmsg, sizeof minmsg, "the smallest budget that fits is %s",
                 vd_fmt_bytes(minb, b4, sizeof b4));
    else
        snprintf(minmsg, sizeof minmsg, "no budget fits (%s)", te.msg);
    vd_plan_step_label(p, net, bad, lab, sizeof lab);
    const char *why = st->mem_in_use > p->budget ? "live tensors need"
                                                 : "after placement (fragmentation) the pool needs";
    uint64_t shown = st->mem_in_use > p->budget ? st->mem_in_use : need;
    snprintf(p->note, sizeof p->note,
             "budget %s too small for policy %s: step %d (%s): %s %s, %s over; %s",
             vd_fmt_bytes(p->budget, b1, sizeof b1), vd_policy_name(opts->policy), bad, lab, why,
             vd_fmt_bytes(shown, b2, sizeof b2), vd_fmt_bytes(shown - p->budget, b3, sizeof b3),
             minmsg);
    vd_errf(e, VD_EBUDGET, "%s", p->note);
}

int vd_plan_build(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                  vd_plan *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    int rc = check_inputs(net, prof, opts, e);
    if (rc) return rc;
    if (opts->forward_only) {
        rc = build_any(net, prof, opts, out, e);
        if (rc == VD_EBUDGET) explain_infeasible(net, prof, opts, out, e);
        return rc;
    }
    rc = build_any(net, prof, opts, out, e);
    if (rc == VD_EBUDGET) {
        explain_infeasible(net, prof, opts, out, e);
        return rc;
    }
    if (rc) return rc;
    rc = build_eval(net, prof, out, e);
    if (rc) {
        if (rc == VD_EBUDGET) {
            out->feasible = false;
            snprintf(out->note, sizeof out->note, "%s", e->msg);
        } else {
            plan_release(out);
        }
        return rc;
    }
    return VD_OK;
}

const vd_interval *vd_plan_resident(const vd_plan *p, int t, int step) {
    if (t < 0 || t >= p->n_tensors) return NULL;
    const vd_tensor *T = &p->tensors[t];
    for (int k = 0; k < T->n_iv; k++) {
        const vd_interval *iv = &p->intervals[T->iv[k]];
        if (iv->first <= step && step <= iv->last) return iv;
    }
    return NULL;
}

/* ---- for auto.c (plan_internal.h) ---------------------------------------- */

void vdp_plan_release(vd_plan *p) { plan_release(p); }

int vdp_build_fixed(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                    vd_policy offload_pol, const int *algos, vd_plan *out, vd_err *e) {
    return build_fixed(net, prof, opts, offload_pol, algos, NULL, out, e);
}

int vdp_build_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                     vd_plan *out, vd_err *e) {
    if (opts->policy == VD_POLICY_AUTO) return vd_errf(e, VD_EINTERNAL, "vdp_build_policy(auto)");
    return build_any(net, prof, opts, out, e);
}

int vdp_min_budget_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                          uint64_t *min_budget, vd_err *e) {
    if (opts->policy == VD_POLICY_AUTO) return vd_errf(e, VD_EINTERNAL, "vdp_min_budget_policy(auto)");
    return vd_plan_min_budget(net, prof, opts, min_budget, e);
}

int vdp_fastest_algo(const vd_profile_layer *pl) { return fastest_algo(pl); }
int vdp_minws_algo(const vd_profile_layer *pl) { return minws_algo(pl); }
int vdp_fastest_pass(const vd_profile_layer *pl, bool bwd) { return fastest_pass(pl, bwd); }
int vdp_minws_pass(const vd_profile_layer *pl, bool bwd) { return minws_pass(pl, bwd); }

void vdp_opts_algos(const vd_profile *prof, const vd_plan_opts *opts, int L, int *algos) {
    for (int i = 0; i < L; i++) {
        const vd_profile_layer *pl = &prof->layers[i];
        if (opts->algos) algos[i] = opts->algos[i];
        else if (opts->fixed_algo >= 0)
            algos[i] = opts->fixed_algo < pl->n_algos ? opts->fixed_algo : pl->n_algos - 1;
        else algos[i] = fastest_algo(pl);
        algos[L + i] = opts->algos_bwd ? opts->algos_bwd[i] : algos[i];
    }
}
