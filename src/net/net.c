/* net.c — shape inference, validation, parameter table (the per-op parts
 * come from vd_op_table, src/net/ops.c). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "net/net.h"

void vd_net_init(vd_net *net) { memset(net, 0, sizeof *net); }

void vd_net_free(vd_net *net) {
    vd_free(net->layers);
    vd_free(net->params);
    memset(net, 0, sizeof *net);
}

int vd_net_add_layer(vd_net *net, const vd_layer *l, vd_err *e) {
    if ((net->n_layers & (net->n_layers - 1)) == 0) { /* grow at powers of two */
        int cap = net->n_layers ? net->n_layers * 2 : 16;
        if (cap < 16) cap = 16;
        vd_layer *nl = vd_realloc(net->layers, (size_t)cap * sizeof *nl, e);
        if (!nl) return -1;
        net->layers = nl;
    }
    net->layers[net->n_layers] = *l;
    return net->n_layers++;
}

int vd_net_find(const vd_net *net, const char *name) {
    for (int i = 0; i < net->n_layers; i++)
        if (strcmp(net->layers[i].name, name) == 0) return i;
    return -1;
}

int64_t vd_net_out_numel(const vd_net *net, int i) {
    if (i < 0) return (int64_t)net->in_c * net->in_h * net->in_w;
    const vd_layer *l = &net->layers[i];
    return (int64_t)l->c * l->h * l->w;
}

int vd_net_layer_err(const vd_net *net, const vd_layer *l, vd_err *e, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vd_errf(e, VD_ESPEC, "%s:%d:%d: layer '%s': %s", net->path[0] ? net->path : "<spec>",
                   l->line > 0 ? l->line : 1, l->col > 0 ? l->col : 1, l->name, msg);
}
#define layer_err vd_net_layer_err   /* the short name inside this file */

void vd_net_in_shape(const vd_net *net, int src, int *c, int *h, int *w) {
    if (src < 0) { *c = net->in_c; *h = net->in_h; *w = net->in_w; return; }
    *c = net->layers[src].c; *h = net->layers[src].h; *w = net->layers[src].w;
}

const char *vd_net_in_name(const vd_net *net, int src) {
    return src < 0 ? "input" : net->layers[src].name;
}

int vd_net_add_param(vd_net *net, int layer, const char *suffix, vd_param_role role, int ndim,
                     const int64_t *shape, vd_err *e) {
    int np_ = net->n_params;
    if (np_ == 0 || (np_ >= 64 && (np_ & (np_ - 1)) == 0)) { /* grow at powers of two, from 64 */
        vd_param *np = vd_realloc(net->params, (size_t)(np_ ? 2 * np_ : 64) * sizeof *np, e);
        if (!np) return VD_ENOMEM;
        net->params = np;
    }
    vd_param *p = &net->params[net->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s.%s", net->layers[layer].name, suffix);
    vd_param_kind kind =
        role == VD_ROLE_RUNNING_MEAN || role == VD_ROLE_RUNNING_VAR ? VD_PARAM_BUFFER : VD_PARAM_WEIGHT;
    p->kind = kind;
    p->role = role;
    p->layer = layer;
    p->ndim = ndim;
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        p->shape[d] = shape[d];
        if (!vd_mul_u64(n, (uint64_t)shape[d], &n) || n > ((uint64_t)1 << 40))
            return layer_err(net, &net->layers[layer], e, "parameter %s is too large", p->name);
    }
    p->numel = (int64_t)n;
    p->offset = net->param_floats;
    net->param_floats += p->numel;
    if (kind == VD_PARAM_WEIGHT) net->n_trainable += p->numel;
    return VD_OK;
}

/* Layer i: its op's defaults, then the checks and the output shape, stored
 * in the layer. */
static int infer_layer(vd_net *net, int i, vd_err *e) {
    vd_layer *l = &net->layers[i];
    if ((unsigned)l->op >= VD_OP_COUNT) return layer_err(net, l, e, "unknown op %d", (int)l->op);
    const vd_op_info *info = &vd_op_table[l->op];
    if (l->n_in < info->min_inputs || l->n_in > info->max_inputs) {
        if (info->min_inputs == info->max_inputs)
            return layer_err(net, l, e, "%s takes exactly %d input%s, got %d", info->name,
                             info->min_inputs, info->min_inputs == 1 ? "" : "s", l->n_in);
        return layer_err(net, l, e, "%s takes %d to %d inputs, got %d", info->name,
                         info->min_inputs, info->max_inputs, l->n_in);
    }
    for (int k = 0; k < l->n_in; k++)
        if (l->in[k] < -1 || l->in[k] >= i)
            return layer_err(net, l, e, "input %d refers to a layer that is not defined before it", k);
    if (info->defaults) info->defaults(l);
    int c, h, w;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    int64_t oc = c, oh = h, ow = w;
    int rc;
    if (info->infer && (rc = info->infer(net, i, &oc, &oh, &ow, e))) return rc;
    if (oc <= 0 || oh <= 0 || ow <= 0)
        return layer_err(net, l, e, "output shape %lldx%lldx%lld is empty",
                         (long long)oc, (long long)oh, (long long)ow);
    if (oc > INT32_MAX || oh > INT32_MAX || ow > INT32_MAX)
        return layer_err(net, l, e, "output dimension too large");
    l->c = (int)oc; l->h = (int)oh; l->w = (int)ow;
    /* activation bytes at the batch size must fit in 64 bits */
    uint64_t bytes;
    int batch = net->train.batch > 0 ? net->train.batch : 1;
    if (!vd_mul_u64((uint64_t)oc, (uint64_t)oh, &bytes) || !vd_mul_u64(bytes, (uint64_t)ow, &bytes) ||
        !vd_mul_u64(bytes, (uint64_t)batch, &bytes) || !vd_mul_u64(bytes, 4, &bytes))
        return layer_err(net, l, e,
                         "output of %lldx%lldx%lld at batch %d overflows 64-bit byte counts",
                         (long long)oc, (long long)oh, (long long)ow, batch);
    return VD_OK;
}

/* qsort has no context argument in C11; finalize is not reentrant across
 * threads for this one sort, which is acceptable for a setup-time call. */
static _Thread_local const vd_net *g_sort_net;
static int cmp_layer_name(const void *a, const void *b) {
    int ia = *(const int *)a, ib = *(const int *)b;
    int c = strcmp(g_sort_net->layers[ia].name, g_sort_net->layers[ib].name);
    return c ? c : (ia > ib) - (ia < ib);
}

int vd_net_finalize(vd_net *net, vd_err *e) {
    const char *path = net->path[0] ? net->path : "<spec>";
    if (net->in_c <= 0 || net->in_h <= 0 || net->in_w <= 0)
        return vd_errf(e, VD_ESPEC, "%s:1:1: input channels, height and width must be positive", path);
    if (net->classes <= 0)
        return vd_errf(e, VD_ESPEC, "%s:1:1: input classes must be positive", path);
    if (net->n_layers == 0) return vd_errf(e, VD_ESPEC, "%s:1:1: the net has no layers", path);
    {
        uint64_t b;
        int batch = net->train.batch > 0 ? net->train.batch : 1;
        if (!vd_mul_u64((uint64_t)net->in_c * (uint64_t)net->in_h, (uint64_t)net->in_w, &b) ||
            !vd_mul_u64(b, (uint64_t)batch * 4, &b))
            return vd_errf(e, VD_ESPEC, "%s:1:1: input at batch %d overflows 64-bit byte counts",
                           path, batch);
    }
    {   /* duplicate names: sort indices by name, compare neighbours (O(n log n)) */
        int *idx = vd_malloc((size_t)net->n_layers * sizeof *idx, e);
        if (!idx) return VD_ENOMEM;
        for (int i = 0; i < net->n_layers; i++) idx[i] = i;
        g_sort_net = net;
        qsort(idx, (size_t)net->n_layers, sizeof *idx, cmp_layer_name);
        g_sort_net = NULL;
        for (int k = 1; k < net->n_layers; k++)
            if (strcmp(net->layers[idx[k]].name, net->layers[idx[k - 1]].name) == 0) {
                const vd_layer *dup = &net->layers[idx[k]];  /* the later definition */
                int first = idx[k - 1];
                vd_free(idx);
                return layer_err(net, dup, e, "duplicate layer name (first defined at line %d)",
                                 net->layers[first].line);
            }
        vd_free(idx);
    }
    vd_free(net->params);
    net->params = NULL;
    net->n_params = 0;
    net->param_floats = 0;
    net->n_trainable = 0;
    int rc;
    for (int i = 0; i < net->n_layers; i++) {
        if ((rc = infer_layer(net, i, e))) return rc;
        vd_layer *l = &net->layers[i];
        l->no_grad = false;   /* the parameters are new: none frozen (vd_net_freeze) */
        l->param_first = net->n_params;
        if (vd_op_table[l->op].params && (rc = vd_op_table[l->op].params(net, i, e))) return rc;
        l->n_params = net->n_params - l->param_first;
    }
    {   /* all activations plus parameters at the batch size must fit in 2^62 bytes,
         * so that every later sum of byte counts (plans, summaries) is safe */
        uint64_t total = (uint64_t)net->param_floats * 4, b;
        int batch = net->train.batch > 0 ? net->train.batch : 1;
        for (int i = 0; i < net->n_layers; i++) {
            const vd_layer *l = &net->layers[i];
            if (!vd_mul_u64((uint64_t)l->c * (uint64_t)l->h, (uint64_t)l->w, &b) ||
                !vd_mul_u64(b, (uint64_t)batch * 4, &b) || !vd_add_u64(total, b, &total) ||
                total > ((uint64_t)1 << 62))
                return layer_err(net, l, e,
                                 "the net's activations at batch %d exceed 2^62 bytes in total", batch);
        }
    }
    const vd_layer *last = &net->layers[net->n_layers - 1];
    if (last->op != VD_OP_SOFTMAX_XENT)
        return layer_err(net, last, e, "the last layer must be softmax_cross_entropy (the loss)");
    for (int i = 0; i < net->n_layers - 1; i++)
        if (net->layers[i].op == VD_OP_SOFTMAX_XENT)
            return layer_err(net, &net->layers[i], e, "only the last layer may be the loss");
    /* every layer but the loss must feed something: a dangling branch has no gradient */
    for (int i = 0; i < net->n_layers - 1; i++) {
        bool used = false;
        for (int j = i + 1; j < net->n_layers && !used; j++)
            for (int k = 0; k < net->layers[j].n_in; k++)
                if (net->layers[j].in[k] == i) { used = true; break; }
        if (!used)
            return layer_err(net, &net->layers[i], e,
                             "output is never used (every layer must lead to the loss)");
    }
    return VD_OK;
}

int vd_net_freeze(vd_net *net, const char *pattern, vd_err *e) {
    for (int k = 0; k < net->n_params; k++) net->params[k].frozen = false;
    for (int i = 0; i < net->n_layers; i++) net->layers[i].no_grad = false;
    if (!pattern) return VD_OK;
    regex_t re;
    int rc = vd_regex_compile(&re, pattern, "--freeze", e);
    if (rc) return rc;
    int frozen = 0, buffers = 0, trained = 0;
    for (int k = 0; k < net->n_params; k++) {
        vd_param *p = &net->params[k];
        bool hit = vd_regex_search(&re, p->name);
        if (p->kind != VD_PARAM_WEIGHT) buffers += hit;
        else if (hit) { p->frozen = true; frozen++; }
        else trained += p->numel > 0;
    }
    regfree(&re);
    if (!frozen) {
        for (int k = 0; k < net->n_params; k++) net->params[k].frozen = false;
        return vd_errf(e, VD_EUSAGE, "--freeze '%s' matches no parameter of net '%s'%s (it is "
                       "searched for in parameter names such as '%s': a layer's name, then "
                       ".weight or .bias)", pattern, net->name,
                       buffers ? ", only buffers (running statistics are no parameters: batch "
                                 "norm updates them in training whatever is frozen)" : "",
                       net->n_params ? net->params[0].name : "conv1.weight");
    }
    if (!trained) {
        for (int k = 0; k < net->n_params; k++) net->params[k].frozen = false;
        return vd_errf(e, VD_EUSAGE, "--freeze '%s' freezes every parameter of net '%s': "
                       "nothing would train", pattern, net->name);
    }
    /* layers in topological order: an input's flag is final before its reader's */
    for (int i = 0; i < net->n_layers; i++) {
        vd_layer *l = &net->layers[i];
        bool grad = false;
        for (int k = l->param_first; k < l->param_first + l->n_params; k++)
            grad |= vd_param_trained(&net->params[k]);
        for (int k = 0; k < l->n_in; k++) grad |= l->in[k] >= 0 && !net->layers[l->in[k]].no_grad;
        l->no_grad = !grad;
    }
    return VD_OK;
}

void vd_net_frozen_count(const vd_net *net, vd_freeze_count *c) {
    memset(c, 0, sizeof *c);
    for (int k = 0; k < net->n_params; k++) {
        const vd_param *p = &net->params[k];
        if (p->kind != VD_PARAM_WEIGHT) continue;
        c->params++;
        c->frozen += p->frozen;
        if (p->frozen) c->frozen_numel += p->numel;
    }
    for (int i = 0; i < net->n_layers; i++) c->no_grad_layers += net->layers[i].no_grad;
}

double vd_net_layer_flops(const vd_net *net, int i) {
    const vd_op_info *info = &vd_op_table[net->layers[i].op];
    return info->flops ? info->flops(net, i) : 0;
}

void vd_net_init_params(const vd_net *net, float *params, uint64_t seed) {
    vd_net_init_params_range(net, seed, 0, net->param_floats, params);
}

void vd_net_init_params_range(const vd_net *net, uint64_t seed, int64_t first, int64_t n,
                              float *dst) {
    int64_t end = first + n;
    for (int pi = 0; pi < net->n_params; pi++) {
        const vd_param *p = &net->params[pi];
        /* the part [a, b) of this parameter's values that the slice holds */
        int64_t a = first > p->offset ? first - p->offset : 0;
        int64_t b = end < p->offset + p->numel ? end - p->offset : p->numel;
        if (a >= b) continue;
        float *out = dst + (p->offset + a - first);
        const vd_layer *l = &net->layers[p->layer];
        if (p->role == VD_ROLE_BN_SCALE || p->role == VD_ROLE_BN_SHIFT ||
            p->role == VD_ROLE_RUNNING_MEAN || p->role == VD_ROLE_RUNNING_VAR) {
            float v = p->role == VD_ROLE_BN_SCALE || p->role == VD_ROLE_RUNNING_VAR ? 1.0f : 0.0f;
            for (int64_t j = a; j < b; j++) out[j - a] = v;
            continue;
        }
        /* conv / fc: fan_in from the weight's shape */
        const vd_param *wp = &net->params[l->param_first];
        int64_t fan_in = 1;
        for (int d = 1; d < wp->ndim; d++) fan_in *= wp->shape[d];
        float bound = 1.0f / sqrtf((float)fan_in);
        vd_rng r;
        vd_rng_seed(&r, seed, (uint64_t)pi + 1);
        vd_rng_advance(&r, (uint64_t)a);   /* one draw per value */
        for (int64_t j = a; j < b; j++) out[j - a] = (2.0f * vd_rng_uniform(&r) - 1.0f) * bound;
    }
}

const char *vd_optimizer_name(vd_optimizer o) {
    static const char *const names[] = VD_OPTIMIZER_NAMES;
    return (unsigned)o < VD_ARRAY_LEN(names) ? names[o] : "?";
}

void vd_train_optimizer_defaults(vd_train_cfg *t) {
    bool adamw = t->optimizer == VD_OPT_ADAMW;
    if (!t->has_lr) t->lr = adamw ? VD_ADAMW_DEFAULT_LR : VD_DEFAULT_LR;
    if (!t->has_weight_decay) t->weight_decay = adamw ? VD_ADAMW_DEFAULT_WD : VD_DEFAULT_WD;
}

const char *vd_math_name(vd_math m) {
    static const char *const names[] = VD_MATH_NAMES;
    return (unsigned)m < VD_ARRAY_LEN(names) ? names[m] : "?";
}
