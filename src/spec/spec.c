/* spec.c — YAML network spec -> vd_net (over the tree of ydoc.h): the
 * entry points, the top-level keys and the layer list.
 *
 * Sections: errors; the input section; layer expansion (entries, repeat:
 * and if:, layers with their op-specific keys, names and inputs); entry
 * points. The names table, expressions, value readers, the train: section
 * and templates have files of their own (spec_internal.h lists them). The
 * format is documented in man/vdnn-net.5. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "spec/spec_internal.h"

#define MAX_WORK 100000       /* layer entries visited during expansion */

/* ======================================================================
 * State and errors
 * ====================================================================== */

/* " (in template 'T' used by 'U' at FILE:L:C; template ...)" or "". */
static void ctx_suffix(const sp *s, char *buf, size_t n) {
    buf[0] = 0;
    size_t used = 0;
    for (int d = s->depth - 1; d >= 0 && used < n; d--) {
        const frame *f = &s->frames[d];
        int k;
        if (d < s->depth - 4) /* the innermost four say enough */
            k = snprintf(buf + used, n - used, "; and %d outer use%s", d + 1, d ? "s" : "");
        else
            k = snprintf(buf + used, n - used, "%s template '%s' used by '%s' at %s:%d:%d",
                         d == s->depth - 1 ? " (in" : ";", f->tmpl, f->use, s->file, f->line, f->col);
        if (k < 0 || (size_t)k >= n - used) { used = n; break; }
        used += (size_t)k;
        if (d < s->depth - 4) break;
    }
    if (used >= n) used = strlen(buf);
    if (s->depth > 0 && used + 2 <= n) { buf[used] = ')'; buf[used + 1] = 0; }
}

int vds_fail_msg(sp *s, int line, int col, const char *msg, const char *ctx) {
    s->failed = true;
    return vd_errf(s->e, VD_ESPEC, "%s:%d:%d: %s%s", s->file, line, col, msg, ctx);
}

/* Report an error at mark m (first error wins; a pending unknown input that
 * came earlier in the file is reported instead). Returns VD_ESPEC. */
int vds_err_at(sp *s, mark m, const char *fmt, ...) {
    if (s->failed) return s->e ? s->e->code : VD_ESPEC;
    if (s->pending) return vds_report_pending(s);
    char msg[768], ctx[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx_suffix(s, ctx, sizeof ctx);
    return vds_fail_msg(s, ln(m), cl(m), msg, ctx);
}

int vds_nomem(sp *s) {
    s->failed = true;
    return VD_ENOMEM;
}

/* ======================================================================
 * Top-level sections: input
 * ====================================================================== */

static int parse_input(sp *s, yd_node *n, mark top) {
    static const char *const keys[] = {"channels", "height", "width", "classes"};
    yd_node *v[4];
    int rc = vds_map_keys(s, n, "'input'", keys, 4, NULL, NULL, v);
    if (rc) return rc;
    int *dst[4] = {&s->net->in_c, &s->net->in_h, &s->net->in_w, &s->net->classes};
    for (int i = 0; i < 4; i++) {
        if (!v[i]) return vds_err_at(s, mk(n), "missing key '%s' in 'input'", keys[i]);
        if ((rc = vds_get_int(s, NULL, v[i], keys[i], 1, dst[i]))) return rc;
    }
    (void)top;
    return VD_OK;
}

/* ======================================================================
 * Layer expansion
 * ====================================================================== */

static const char *const COMMON_KEYS[] = {"name", "type", "inputs", "repeat", "index", "if"};
enum { K_NAME, K_TYPE, K_INPUTS, K_REPEAT, K_INDEX, K_IF, K_NCOMMON };
/* The key of every layer with parameters (vd_op_info.has_params), after the
 * common ones: its parameters learn at lr x lr_mult (Caffe's name). */
#define LR_MULT_KEY "lr_mult"
static const char *const USE_KEYS[] = {"use", "name", "with", "inputs", "repeat", "index", "if"};

/* Op-specific keys come from the op table (vd_op_info.keys). */
#define MAX_OP_KEYS 16

/* Every op-specific key (from the table) and the template keys, into
 * buf (NULL-terminated), for "key 'kernel' does not apply to relu layers". */
#define ALL_KEYS_MAX (VD_OP_COUNT * MAX_OP_KEYS + 4)
static const char *const *op_keys_everywhere(const char *buf[ALL_KEYS_MAX]) {
    int n = 0;
    for (int op = 0; op < VD_OP_COUNT; op++)
        for (int i = 0; vd_op_table[op].keys && vd_op_table[op].keys[i] && i < MAX_OP_KEYS; i++) {
            bool dup = false;
            for (int j = 0; j < n && !dup; j++) dup = !strcmp(buf[j], vd_op_table[op].keys[i]);
            if (!dup) buf[n++] = vd_op_table[op].keys[i];
        }
    buf[n++] = LR_MULT_KEY;
    buf[n++] = "use";
    buf[n++] = "with";
    buf[n] = NULL;
    return buf;
}

/* The vd_spec_keys reader over one layer mapping's op-specific keys. */
typedef struct layer_keys {
    sp *s;
    const scope *sc;
    yd_node *item;
    const char *const *allowed;
    int n;
    yd_node **v;
} layer_keys;

static yd_node *lk_node(const vd_spec_keys *k, const char *key) {
    const layer_keys *c = k->ctx;
    int i = vds_find_key(c->allowed, c->n, key);
    return i >= 0 ? c->v[i] : NULL;
}

static bool lk_has(const vd_spec_keys *k, const char *key) { return lk_node(k, key) != NULL; }

static int lk_int(const vd_spec_keys *k, const char *key, int min, int *out) {
    const layer_keys *c = k->ctx;
    yd_node *n = lk_node(k, key);
    return n ? vds_get_int(c->s, c->sc, n, key, min, out) : VD_OK;
}

static int lk_pair(const vd_spec_keys *k, const char *key, int min, int *a, int *b) {
    const layer_keys *c = k->ctx;
    yd_node *n = lk_node(k, key);
    return n ? vds_get_pair(c->s, c->sc, n, key, min, a, b) : VD_OK;
}

static int lk_bool(const vd_spec_keys *k, const char *key, bool *out) {
    const layer_keys *c = k->ctx;
    yd_node *n = lk_node(k, key);
    return n ? vds_get_bool(c->s, c->sc, n, key, out) : VD_OK;
}

static int lk_float(const vd_spec_keys *k, const char *key, double lo, bool lo_open, double hi,
                    bool hi_open, const char *range, float *out) {
    const layer_keys *c = k->ctx;
    yd_node *n = lk_node(k, key);
    double d;
    if (!n) return VD_OK;
    int rc = vds_get_float(c->s, c->sc, n, key, lo, lo_open, hi, hi_open, range, &d);
    if (!rc) *out = (float)d;
    return rc;
}

static int lk_word(const vd_spec_keys *k, const char *key, char **out) {
    const layer_keys *c = k->ctx;
    yd_node *n = lk_node(k, key);
    *out = NULL;
    return n ? vds_scalar(c->s, c->sc, n, key, out) : VD_OK;
}

static int lk_error(const vd_spec_keys *k, const char *key, const char *msg) {
    const layer_keys *c = k->ctx;
    yd_node *n = key ? lk_node(k, key) : NULL;
    return vds_err_at(c->s, n ? mk(n) : mk(c->item), "%s", msg);
}

static bool valid_name_char(unsigned char c) {
    return isalnum(c) || c == '_' || c == '.' || c == '-' || c == '/' || c == ':';
}

/* Substitute and check a layer/use name; full = prefix.name. */
int vds_get_name(sp *s, const scope *sc, yd_node *n, const char *prefix, char full[VD_NAME_MAX]) {
    char *t;
    int rc = vds_scalar(s, sc, n, "name", &t);
    if (rc) return rc;
    if (!*t) rc = vds_err_at(s, mk(n), "'name' must not be empty");
    for (const char *p = t; !rc && *p; p++)
        if (!valid_name_char((unsigned char)*p))
            rc = vds_err_at(s, mk(n),
                            "name '%.96s' contains '%c'; use letters, digits and _ . - / :", t,
                            isprint((unsigned char)*p) ? *p : '?');
    if (!rc && vds_is_input_name(t))
        rc = vds_err_at(s, mk(n), "'%s' is reserved for the net input and cannot name a layer", t);
    if (!rc) {
        int k = prefix[0] ? snprintf(full, VD_NAME_MAX, "%s.%s", prefix, t)
                          : snprintf(full, VD_NAME_MAX, "%s", t);
        if (k < 0 || k >= VD_NAME_MAX)
            rc = vds_err_at(s, mk(n), "name '%s%s%.96s' is too long (at most %d characters)", prefix,
                            prefix[0] ? "." : "", t, VD_NAME_MAX - 1);
    }
    if (!rc) {
        const name_ent *ne = vds_names_find(s, full);
        if (ne)
            rc = vds_err_at(s, mk(n), "duplicate layer name '%s' (first defined at line %d)", full,
                            ne->line);
    }
    vd_free(t);
    return rc;
}

/* Resolve one input name node into *idx (-1 = net input). An unknown name
 * becomes the pending error (reported later, knowing whether it is defined
 * further down) and resolves to -1 meanwhile. */
static int get_input(sp *s, const scope *sc, yd_node *n, const char *prefix, int *idx) {
    char *t;
    int rc = vds_scalar(s, sc, n, "inputs", &t);
    if (rc) return rc;
    *idx = -1;
    if (!vds_resolve(s, prefix, t, idx) && !s->pending && !s->failed) {
        s->pending = true;
        s->pend_name = t; /* now owned by s */
        t = NULL;
        if (!(s->pend_prefix = vd_strdup(prefix, s->e))) {
            s->pending = false;
            return vds_nomem(s);
        }
        ctx_suffix(s, s->pend_ctx, sizeof s->pend_ctx);
        s->pend_line = ln(mk(n));
        s->pend_col = cl(mk(n));
    }
    vd_free(t);
    return VD_OK;
}

int vds_get_inputs(sp *s, const scope *sc, yd_node *n, const char *prefix, int *n_in,
                   int in[VD_MAX_INPUTS]) {
    if (n->type == YD_SCALAR) { /* inputs: name */
        *n_in = 1;
        return get_input(s, sc, n, prefix, &in[0]);
    }
    if (n->type != YD_SEQ)
        return vds_err_at(s, mk(n), "'inputs' must be a list of layer names");
    int cnt = (int)n->n;
    if (cnt == 0) return vds_err_at(s, mk(n), "'inputs' must not be empty");
    if (cnt > VD_MAX_INPUTS)
        return vds_err_at(s, mk(n), "at most %d inputs are supported, got %d", VD_MAX_INPUTS, cnt);
    for (int i = 0; i < cnt; i++) {
        yd_node *it = ITEM(n, i);
        int rc = get_input(s, sc, it, prefix, &in[i]);
        if (rc) return rc;
    }
    *n_in = cnt;
    return VD_OK;
}

static int add_layer(sp *s, vd_layer *l, int *prev) {
    if (s->net->n_layers >= VD_SPEC_MAX_LAYERS) {
        mark m = {l->line, l->col};
        return vds_err_at(s, m, "the net has too many layers (at most %d)", VD_SPEC_MAX_LAYERS);
    }
    if (s->net->n_layers >= s->ctx_cap) {
        int nc = s->ctx_cap ? s->ctx_cap * 2 : 64;
        char **nv = vd_realloc(s->ctx, (size_t)nc * sizeof *nv, s->e);
        if (!nv) return vds_nomem(s);
        s->ctx = nv;
        s->ctx_cap = nc;
    }
    s->ctx[s->net->n_layers] = NULL;
    if (s->depth > 0) {
        char buf[768];
        ctx_suffix(s, buf, sizeof buf);
        if (!(s->ctx[s->net->n_layers] = vd_strdup(buf, s->e))) return vds_nomem(s);
    }
    int idx = vd_net_add_layer(s->net, l, s->e);
    if (idx < 0) {
        vd_free(s->ctx[s->net->n_layers]);
        return vds_nomem(s);
    }
    int rc = vds_names_put(s, l->name, idx, l->line, l->col);
    if (rc) return rc;
    *prev = idx;
    return VD_OK;
}

static int build_layer(sp *s, yd_node *item, const scope *sc, const char *prefix, int *prev) {
    int rc;
    /* type first: it decides which keys are valid */
    yd_node *type_node = NULL;
    for (uint32_t i = 0; i < item->n; i++) {
        yd_node *k = KEY(item, i);
        if (k->type == YD_SCALAR && !strcmp(TXT(k), "type")) {
            type_node = VAL(item, i);
            break;
        }
    }
    if (!type_node) return vds_err_at(s, mk(item), "missing key 'type' (or 'use' for a template)");
    char *tname;
    if ((rc = vds_scalar(s, sc, type_node, "type", &tname))) return rc;
    int op = -1;
    const char *op_names[VD_OP_COUNT];
    for (int i = 0; i < VD_OP_COUNT; i++) {
        op_names[i] = vd_op_table[i].name;
        if (!strcmp(tname, op_names[i])) op = i;
    }
    if (op < 0) {
        const char *sug = vd_suggest(tname, op_names, VD_OP_COUNT);
        if (sug) rc = vds_err_at(s, mk(type_node), "unknown layer type '%.64s' (did you mean '%s'?)", tname, sug);
        else {
            char list[512];
            size_t u = 0;
            list[0] = 0;
            for (int i = 0; i < VD_OP_COUNT && u < sizeof list; i++) {
                int w = snprintf(list + u, sizeof list - u, "%s%s", i ? ", " : "", op_names[i]);
                if (w < 0) break;
                u += (size_t)w;
            }
            rc = vds_err_at(s, mk(type_node), "unknown layer type '%.64s' (one of: %s)", tname, list);
        }
        vd_free(tname);
        return rc;
    }
    vd_free(tname);

    const char *allowed[K_NCOMMON + 1 + MAX_OP_KEYS];
    int na = 0;
    for (int i = 0; i < K_NCOMMON; i++) allowed[na++] = COMMON_KEYS[i];
    int k_lr_mult = vd_op_table[op].has_params ? na : -1;
    if (k_lr_mult >= 0) allowed[na++] = LR_MULT_KEY;
    for (int i = 0; vd_op_table[op].keys && vd_op_table[op].keys[i] && i < MAX_OP_KEYS; i++)
        allowed[na++] = vd_op_table[op].keys[i];
    yd_node *v[K_NCOMMON + 1 + MAX_OP_KEYS];
    char what[96];
    char what_a[96];
    snprintf(what, sizeof what, "%s layers", vd_op_table[op].name);
    snprintf(what_a, sizeof what_a, "a %s layer", vd_op_table[op].name);
    const char *everywhere[ALL_KEYS_MAX];
    if ((rc = vds_map_keys(s, item, what_a, allowed, na, op_keys_everywhere(everywhere), what, v))) return rc;

    vd_layer l;
    memset(&l, 0, sizeof l);
    l.op = (vd_op)op;
    l.line = ln(mk(item));
    l.col = cl(mk(item));
    if (!v[K_NAME]) return vds_err_at(s, mk(item), "missing key 'name' in %s layer", vd_op_table[op].name);
    if ((rc = vds_get_name(s, sc, v[K_NAME], prefix, l.name))) return rc;

    if (v[K_INPUTS]) {
        if ((rc = vds_get_inputs(s, sc, v[K_INPUTS], prefix, &l.n_in, l.in))) return rc;
    } else {
        l.n_in = 1;
        l.in[0] = *prev;
    }
    const vd_op_info *info = &vd_op_table[op];
    if (l.n_in < info->min_inputs) {
        mark m = v[K_INPUTS] ? mk(v[K_INPUTS]) : mk(item);
        return vds_err_at(s, m, "layer '%s': %s needs at least %d inputs (inputs: [a, b])", l.name, info->name,
                          info->min_inputs);
    }
    if (l.n_in > info->max_inputs)
        return vds_err_at(s, mk(v[K_INPUTS]), "layer '%s': %s takes %d input%s, got %d", l.name, info->name,
                          info->max_inputs, info->max_inputs == 1 ? "" : "s", l.n_in);

    if (k_lr_mult >= 0 && v[k_lr_mult]) {
        double m;
        if ((rc = vds_get_float(s, sc, v[k_lr_mult], LR_MULT_KEY, 0, false, 1e30, false,
                                "a number >= 0 (0: not updated)", &m)))
            return rc;
        l.lr_mult = (float)m;
        l.lr_mult_set = true;
    }
    if (info->parse) {
        layer_keys lk = {s, sc, item, allowed, na, v};
        vd_spec_keys k = {&lk, l.name, lk_has, lk_int, lk_pair, lk_bool, lk_float, lk_word, lk_error};
        if ((rc = info->parse(&l, &k))) return rc;
    }
    return add_layer(s, &l, prev);
}

static int expand_item(sp *s, yd_node *item, const scope *sc, const char *prefix, int *prev) {
    if (item->type != YD_MAP)
        return vds_err_at(s, mk(item), "a layer must be a mapping (name: ..., type: ...), not %s",
                          vds_node_kind(item));
    bool is_use = false;
    for (uint32_t i = 0; i < item->n; i++) {
        yd_node *k = KEY(item, i);
        if (k->type == YD_SCALAR && !strcmp(TXT(k), "use")) is_use = true;
    }
    yd_node *uv[U_NKEYS], *rep = NULL, *idxn = NULL, *cond = NULL;
    int rc;
    if (is_use) {
        for (uint32_t i = 0; i < item->n; i++) {
            yd_node *k = KEY(item, i);
            if (k->type == YD_SCALAR && !strcmp(TXT(k), "type"))
                return vds_err_at(s, mk(k), "an entry has either 'type' (a layer) or 'use' (a template), "
                                  "not both");
        }
        const char *everywhere[ALL_KEYS_MAX];
        if ((rc = vds_map_keys(s, item, "a template use", USE_KEYS, U_NKEYS, op_keys_everywhere(everywhere),
                               "template uses (put layer settings in the template)", uv)))
            return rc;
        rep = uv[U_REPEAT];
        idxn = uv[U_INDEX];
        cond = uv[U_IF];
    } else {
        for (uint32_t i = 0; i < item->n; i++) {
            yd_node *k = KEY(item, i);
            if (k->type != YD_SCALAR) continue;
            const char *key = TXT(k);
            if (!strcmp(key, "repeat")) rep = VAL(item, i);
            else if (!strcmp(key, "index")) idxn = VAL(item, i);
            else if (!strcmp(key, "if")) cond = VAL(item, i);
        }
    }
    int64_t count = 1;
    if (rep && (rc = vds_get_i64(s, sc, rep, "repeat", 0, VD_SPEC_MAX_REPEAT, &count))) return rc;
    const char *ivar = "i";
    if (idxn) {
        if (!rep) return vds_err_at(s, mk(idxn), "'index' needs 'repeat'");
        if (idxn->type != YD_SCALAR || strlen(TXT(idxn)) != idxn->n ||
            !vds_is_ident(TXT(idxn)))
            return vds_err_at(s, mk(idxn), "'index' must be a variable name (letters, digits, _)");
        ivar = TXT(idxn);
    }
    if (rep) {
        if (!strcmp(ivar, "name") || !strcmp(ivar, "input") || !strcmp(ivar, "true") || !strcmp(ivar, "false"))
            return vds_err_at(s, idxn ? mk(idxn) : mk(rep), "'%s' is reserved and cannot be an index",
                              ivar);
        if (vds_scope_get(sc, ivar, strlen(ivar)))
            return vds_err_at(s, idxn ? mk(idxn) : mk(rep),
                              "index variable '%s' is already defined here; pick another with 'index:'", ivar);
    }
    for (int64_t k = 0; k < count; k++) {
        if (++s->work > MAX_WORK)
            return vds_err_at(s, mk(item), "the spec expands to too many entries (more than %d)", MAX_WORK);
        char ibuf[24];
        _Static_assert(sizeof ibuf > sizeof "-9223372036854775808" - 1, "any int64 fits: never truncated");
        snprintf(ibuf, sizeof ibuf, "%lld", (long long)k);
        var iv = {ivar, ibuf};
        scope inner = {sc, &iv, 1};
        const scope *use_sc = rep ? &inner : sc;
        if (cond) {
            bool on;
            if ((rc = vds_get_cond(s, use_sc, cond, &on))) return rc;
            if (!on) continue;
        }
        rc = is_use ? vds_expand_use(s, item, uv, use_sc, prefix, prev) : build_layer(s, item, use_sc, prefix, prev);
        if (rc) return rc;
    }
    return VD_OK;
}

int vds_expand_list(sp *s, yd_node *seq, const scope *sc, const char *prefix, int *prev) {
    for (uint32_t i = 0; i < seq->n; i++) {
        int rc = expand_item(s, ITEM(seq, i), sc, prefix, prev);
        if (rc) return rc;
    }
    return VD_OK;
}

/* ======================================================================
 * Entry points
 * ====================================================================== */

/* Append the template context of the layer named in a finalize error. */
static void annotate(sp *s) {
    if (!s->e) return;
    char *q = strstr(s->e->msg, "layer '");
    if (!q) return;
    q += 7;
    char *end = strchr(q, '\'');
    if (!end || end - q >= VD_NAME_MAX) return;
    char name[VD_NAME_MAX];
    memcpy(name, q, (size_t)(end - q));
    name[end - q] = 0;
    const name_ent *ne = vds_names_find(s, name);
    if (!ne || ne->idx < 0 || ne->idx >= s->net->n_layers || !s->ctx[ne->idx]) return;
    size_t used = strlen(s->e->msg);
    snprintf(s->e->msg + used, sizeof s->e->msg - used, "%s", s->ctx[ne->idx]);
}

static int parse_doc(sp *s) {
    yd_node *root = yd_root(&s->doc);
    mark m0 = {1, 1};
    if (!root) return vds_err_at(s, m0, "the spec is empty");
    static const char *const keys[] = {"name", "description", "input", "train", "templates",
                                       "layers", "data"};
    yd_node *v[7];
    int rc = vds_map_keys(s, root, "the spec", keys, 7, NULL, NULL, v);
    if (rc) return rc;
    vd_net *net = s->net;
    if (v[0]) {
        char *t;
        if ((rc = vds_scalar(s, NULL, v[0], "name", &t))) return rc;
        if (!*t || strlen(t) >= sizeof net->name)
            rc = vds_err_at(s, mk(v[0]), "'name' must be 1 to %d characters", (int)sizeof net->name - 1);
        else snprintf(net->name, sizeof net->name, "%s", t); /* fits: checked above */
        vd_free(t);
        if (rc) return rc;
    } else {
        const char *b = strrchr(s->file, '/');
        b = b ? b + 1 : s->file;
        size_t n = strcspn(b, ".");
        if (n >= sizeof net->name) n = sizeof net->name - 1; /* documented: vdnn-net(5), name */
        memcpy(net->name, b, n);
        net->name[n] = 0;
        if (!n) snprintf(net->name, sizeof net->name, "net");
    }
    if (v[1] && v[1]->type != YD_SCALAR) return vds_err_at(s, mk(v[1]), "'description' must be text");
    if (!v[2]) return vds_err_at(s, mk(root), "missing key 'input' (channels, height, width, classes)");
    if ((rc = parse_input(s, v[2], mk(root)))) return rc;
    if (v[3] && (rc = vds_parse_train(s, v[3]))) return rc;
    if (v[6] && (rc = vds_parse_data(s, v[6]))) return rc;
    uint64_t in_bytes;
    if (!vd_mul_u64((uint64_t)net->in_c, (uint64_t)net->in_h, &in_bytes) ||
        !vd_mul_u64(in_bytes, (uint64_t)net->in_w, &in_bytes) ||
        !vd_mul_u64(in_bytes, (uint64_t)net->train.batch, &in_bytes) || !vd_mul_u64(in_bytes, 4, &in_bytes))
        return vds_err_at(s, mk(v[2]), "the input %dx%dx%d at batch %d overflows 64-bit byte counts",
                          net->in_c, net->in_h, net->in_w, net->train.batch);
    if (v[4] && !vds_is_null_scalar(s, v[4]) && (rc = vds_parse_templates(s, v[4]))) return rc;
    if (!v[5]) return vds_err_at(s, mk(root), "missing key 'layers'");
    if (v[5]->type != YD_SEQ) return vds_err_at(s, mk(v[5]), "'layers' must be a list");
    if (v[5]->n == 0)
        return vds_err_at(s, mk(v[5]), "'layers' must not be empty");
    int prev = -1;
    if ((rc = vds_expand_list(s, v[5], NULL, "", &prev))) return rc;
    if (s->pending) return vds_report_pending(s);
    if (net->n_layers == 0)
        return vds_err_at(s, mk(v[5]), "'layers' expands to no layers (every entry was skipped by 'if')");
    rc = vd_net_finalize(net, s->e);
    if (rc) {
        s->failed = true;
        if (rc == VD_ESPEC) annotate(s);
        return rc;
    }
    /* Planners and the summary add up every layer's output and every
     * parameter: keep the sums at the batch size well inside 64 bits. */
    uint64_t total = (uint64_t)net->param_floats * 4, b;
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        if (!vd_mul_u64((uint64_t)vd_net_out_numel(net, i), (uint64_t)net->train.batch * 4, &b) ||
            !vd_add_u64(total, b, &total) || total > ((uint64_t)1 << 62)) {
            return vds_fail_msg(s, l->line, l->col, "the net's parameters and activations at this batch exceed "
                                "2^62 bytes", s->ctx[i] ? s->ctx[i] : "");
        }
    }
    return VD_OK;
}

int vd_spec_parse(const char *text, size_t len, const char *name_for_messages, vd_net *net, vd_err *e) {
    sp s;
    memset(&s, 0, sizeof s);
    s.file = name_for_messages ? name_for_messages : "<spec>";
    s.text = text;
    s.len = len;
    s.net = net;
    s.e = e;
    vd_net_free(net);
    vd_net_init(net);
    /* net->path names the spec in messages: a longer one keeps its end */
    size_t fl = strlen(s.file);
    if (fl < sizeof net->path) memcpy(net->path, s.file, fl + 1);
    else snprintf(net->path, sizeof net->path, "...%s", s.file + fl - (sizeof net->path - 4));
    vds_train_defaults(&net->train);
    if (len > VD_SPEC_MAX_TEXT)
        return vd_errf(e, VD_ESPEC, "%s:1:1: the spec is too large (%zu bytes, at most %d)", s.file, len,
                       VD_SPEC_MAX_TEXT);
    /* the tree's first pass rejects nesting and density before building */
    int rc = yd_load(&s.doc, text, len, s.file, e);
    if (rc) {
        yd_free(&s.doc);
        return rc;
    }

    rc = parse_doc(&s);
    if (rc && !s.failed) rc = VD_EINTERNAL; /* every error path sets failed */
    if (rc == VD_EINTERNAL && e && !e->msg[0])
        vd_errf(e, VD_EINTERNAL, "%s: internal error in the spec parser", s.file);

    yd_free(&s.doc);
    vds_clear_pending(&s);
    for (size_t i = 0; i < s.names_cap; i++) vd_free(s.names[i].name);
    vd_free(s.names);
    for (int i = 0; i < net->n_layers && i < s.ctx_cap; i++) vd_free(s.ctx[i]);
    vd_free(s.ctx);
    vd_free(s.tmpls);
    return rc;
}

int vd_spec_load(const char *path, vd_net *net, vd_err *e) {
    char *text = NULL;
    size_t n = 0;
    int rc = vd_read_file_max(path, VD_SPEC_MAX_TEXT, &text, &n, e);
    if (rc == VD_EDATA)         /* the only VD_EDATA: too large */
        return vd_errf(e, VD_ESPEC, "%s:1:1: the spec is too large (at most %d bytes)", path,
                       VD_SPEC_MAX_TEXT);
    if (rc) return rc;
    rc = vd_spec_parse(text, n, path, net, e);
    vd_free(text);
    return rc;
}
