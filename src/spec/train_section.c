/* train_section.c — the spec's train: section.
 *
 * Keys batch, lr, momentum, weight_decay, lr_policy (a type name or a
 * mapping with the type's own keys), iters or epochs, seed, math, and
 * optimizer with its own keys (SGD: momentum, nesterov; AdamW: betas, eps),
 * read into vd_train_cfg over the defaults of vds_train_defaults. The keys and
 * their ranges are documented in man/vdnn-net.5 (TRAINING SETTINGS). */
#include <stdint.h>
#include <string.h>
#include "spec/spec_internal.h"

static const char *const LR_KEYS[] = {"type", "step", "gamma", "milestones", "power", "min_lr", "warmup"};
enum { LR_TYPE, LR_STEP, LR_GAMMA, LR_MILESTONES, LR_POWER, LR_MIN_LR, LR_WARMUP, LR_NKEYS };
static const char *const LR_TYPES[] = {"fixed", "step", "multistep", "poly", "cosine"};

static int parse_lr_policy(sp *s, yd_node *n, vd_lr_policy *lp) {
    yd_node *v[LR_NKEYS];
    yd_node *type_node;
    int rc;
    if (n->type == YD_SCALAR) { /* shorthand: lr_policy: cosine */
        for (int i = 0; i < LR_NKEYS; i++) v[i] = NULL;
        type_node = n;
    } else {
        if ((rc = vds_map_keys(s, n, "'lr_policy'", LR_KEYS, LR_NKEYS, NULL, NULL, v))) return rc;
        if (!v[LR_TYPE]) return vds_err_at(s, mk(n), "missing key 'type' in 'lr_policy'");
        type_node = v[LR_TYPE];
    }
    char *t;
    if ((rc = vds_scalar(s, NULL, type_node, "type", &t))) return rc;
    int type = vds_find_key(LR_TYPES, 5, t);
    if (type < 0) {
        const char *sug = vd_suggest(t, LR_TYPES, 5);
        rc = sug ? vds_err_at(s, mk(type_node), "unknown lr_policy type '%.64s' (did you mean '%s'?)", t, sug)
                 : vds_err_at(s, mk(type_node),
                              "unknown lr_policy type '%.64s' (expected fixed, step, multistep, poly or cosine)", t);
        vd_free(t);
        return rc;
    }
    vd_free(t);
    lp->type = type;
    /* which keys apply to which type */
    static const bool applies[5][LR_NKEYS] = {
        /*            type  step   gamma  miles  power  min_lr warmup */
        /* fixed */ {true, false, false, false, false, false, true},
        /* step */  {true, true,  true,  false, false, false, true},
        /* multi */ {true, false, true,  true,  false, false, true},
        /* poly */  {true, false, false, false, true,  false, true},
        /* cos */   {true, false, false, false, false, true,  true},
    };
    for (int k = 0; k < LR_NKEYS; k++)
        if (v[k] && !applies[type][k])
            return vds_err_at(s, mk(v[k]), "key '%s' does not apply to lr_policy type '%s'", LR_KEYS[k],
                              LR_TYPES[type]);
    double d;
    if (v[LR_STEP]) { if ((rc = vds_get_i64(s, NULL, v[LR_STEP], "step", 1, INT64_MAX, &lp->step))) return rc; }
    else if (type == VD_LR_STEP) return vds_err_at(s, mk(n), "lr_policy type 'step' needs key 'step'");
    if (v[LR_GAMMA]) {
        if ((rc = vds_get_float(s, NULL, v[LR_GAMMA], "gamma", 0, true, 1e30, false, "positive", &d))) return rc;
        lp->gamma = (float)d;
    }
    if (v[LR_POWER]) {
        if ((rc = vds_get_float(s, NULL, v[LR_POWER], "power", 0, true, 1e30, false, "positive", &d))) return rc;
        lp->power = (float)d;
    }
    if (v[LR_MIN_LR]) {
        if ((rc = vds_get_float(s, NULL, v[LR_MIN_LR], "min_lr", 0, false, 1e30, false, "non-negative", &d)))
            return rc;
        lp->min_lr = (float)d;
    }
    if (v[LR_WARMUP] && (rc = vds_get_i64(s, NULL, v[LR_WARMUP], "warmup", 0, INT64_MAX, &lp->warmup))) return rc;
    if (v[LR_MILESTONES]) {
        yd_node *m = v[LR_MILESTONES];
        if (m->type != YD_SEQ)
            return vds_err_at(s, mk(m), "'milestones' must be a list of iterations, e.g. [30000, 60000]");
        int cnt = (int)m->n;
        if (cnt == 0) return vds_err_at(s, mk(m), "'milestones' must not be empty");
        if (cnt > (int)VD_ARRAY_LEN(lp->milestones))
            return vds_err_at(s, mk(m), "at most %d milestones are supported, got %d",
                              (int)VD_ARRAY_LEN(lp->milestones), cnt);
        for (int i = 0; i < cnt; i++) {
            yd_node *it = ITEM(m, i);
            if ((rc = vds_get_i64(s, NULL, it, "milestones", 1, INT64_MAX, &lp->milestones[i]))) return rc;
            if (i && lp->milestones[i] <= lp->milestones[i - 1])
                return vds_err_at(s, mk(it), "'milestones' must be increasing");
        }
        lp->n_milestones = cnt;
    } else if (type == VD_LR_MULTISTEP) {
        return vds_err_at(s, mk(n), "lr_policy type 'multistep' needs key 'milestones'");
    }
    return VD_OK;
}

/* train.betas: [b1, b2], each in [0, 1) (torch.optim.AdamW's check). */
static int parse_betas(sp *s, yd_node *n, vd_train_cfg *t) {
    if (n->type != YD_SEQ || n->n != 2)
        return vds_err_at(s, mk(n), "'betas' must be a list of two numbers in [0, 1), e.g. "
                          "[0.9, 0.999]");
    double b[2];
    for (int i = 0; i < 2; i++) {
        int rc = vds_get_float(s, NULL, ITEM(n, i), "betas", 0, false, 1, true, "in [0, 1)", &b[i]);
        if (rc) return rc;
    }
    t->beta1 = (float)b[0];
    t->beta2 = (float)b[1];
    return VD_OK;
}

/* train.optimizer and the keys of one optimizer only: nesterov (and
 * momentum) are SGD's, betas and eps AdamW's, as in torch.optim, where
 * passing one to the other is an error too. */
static int parse_optimizer(sp *s, yd_node *opt, yd_node *momentum, yd_node *nesterov,
                           yd_node *betas, yd_node *eps, vd_train_cfg *t) {
    int rc;
    if (opt) {
        static const char *const names[] = VD_OPTIMIZER_NAMES;
        const char *o = opt->type == YD_SCALAR ? TXT(opt) : "";
        int k = vds_find_key(names, (int)VD_ARRAY_LEN(names), o);
        if (k < 0) {
            const char *sug = vd_suggest(o, names, (int)VD_ARRAY_LEN(names));
            return vds_err_at(s, mk(opt), "'optimizer' must be sgd or adamw, got '%.64s'%s%s%s", o,
                              sug ? " (did you mean '" : "", sug ? sug : "", sug ? "'?)" : "");
        }
        t->optimizer = (vd_optimizer)k;
    }
    bool adamw = t->optimizer == VD_OPT_ADAMW;
    yd_node *other[] = {adamw ? momentum : betas, adamw ? nesterov : eps};
    static const char *const other_keys[2][2] = {{"betas", "eps"}, {"momentum", "nesterov"}};
    for (int k = 0; k < 2; k++)
        if (other[k])
            return vds_err_at(s, mk(other[k]), "key '%s' does not apply to optimizer %s (%s)",
                              other_keys[adamw][k], vd_optimizer_name(t->optimizer),
                              adamw ? "AdamW's keys are betas and eps"
                                    : "SGD's keys are momentum and nesterov");
    if (nesterov) {
        if ((rc = vds_get_bool(s, NULL, nesterov, "nesterov", &t->nesterov))) return rc;
        /* torch.optim.SGD's rule (vdnn's dampening is 0) */
        if (t->nesterov && !(t->momentum > 0))
            return vds_err_at(s, mk(nesterov), "'nesterov' needs momentum > 0 (momentum is %g)",
                              (double)t->momentum);
    }
    if (betas && (rc = parse_betas(s, betas, t))) return rc;
    if (eps) {
        double d;
        if ((rc = vds_get_float(s, NULL, eps, "eps", 0, true, 1e30, false, "positive", &d))) return rc;
        t->eps = (float)d;
    }
    vd_train_optimizer_defaults(t);
    return VD_OK;
}

int vds_parse_train(sp *s, yd_node *n) {
    static const char *const keys[] = {"batch", "lr", "momentum", "weight_decay", "lr_policy",
                                       "iters", "epochs", "seed", "math", "optimizer",
                                       "nesterov", "betas", "eps"};
    enum { K_BATCH, K_LR, K_MOMENTUM, K_WD, K_LR_POLICY, K_ITERS, K_EPOCHS, K_SEED, K_MATH,
           K_OPTIMIZER, K_NESTEROV, K_BETAS, K_EPS, K_COUNT };
    yd_node *v[K_COUNT];
    int rc = vds_map_keys(s, n, "'train'", keys, K_COUNT, NULL, NULL, v);
    if (rc) return rc;
    vd_train_cfg *t = &s->net->train;
    double d;
    if (v[K_BATCH] && (rc = vds_get_int(s, NULL, v[K_BATCH], "batch", 1, &t->batch))) return rc;
    if (v[K_LR]) {
        if ((rc = vds_get_float(s, NULL, v[K_LR], "lr", 0, true, 1e30, false, "positive", &d))) return rc;
        t->lr = (float)d;
        t->has_lr = true;
    }
    if (v[K_MOMENTUM]) {
        if ((rc = vds_get_float(s, NULL, v[K_MOMENTUM], "momentum", 0, false, 1, true, "in [0, 1)", &d)))
            return rc;
        t->momentum = (float)d;
    }
    if (v[K_WD]) {
        if ((rc = vds_get_float(s, NULL, v[K_WD], "weight_decay", 0, false, 1e30, false, "non-negative", &d)))
            return rc;
        t->weight_decay = (float)d;
        t->has_weight_decay = true;
    }
    /* before lr_policy's check of min_lr against the (optimizer's default) lr */
    if ((rc = parse_optimizer(s, v[K_OPTIMIZER], v[K_MOMENTUM], v[K_NESTEROV], v[K_BETAS],
                              v[K_EPS], t)))
        return rc;
    if (v[K_LR_POLICY] && (rc = parse_lr_policy(s, v[K_LR_POLICY], &t->lr_policy))) return rc;
    if (v[K_ITERS] && (rc = vds_get_i64(s, NULL, v[K_ITERS], "iters", 1, INT64_MAX, &t->iters))) return rc;
    if (v[K_EPOCHS] && (rc = vds_get_i64(s, NULL, v[K_EPOCHS], "epochs", 1, INT64_MAX, &t->epochs)))
        return rc;
    if (v[K_ITERS] && v[K_EPOCHS]) return vds_err_at(s, mk(v[K_EPOCHS]), "give either 'iters' or 'epochs', not both");
    if (v[K_ITERS]) t->epochs = 0;
    if (v[K_LR_POLICY] && t->lr_policy.type == VD_LR_COSINE && t->lr_policy.min_lr > t->lr)
        return vds_err_at(s, mk(v[K_LR_POLICY]), "lr_policy 'min_lr' (%g) must not exceed 'lr' (%g)",
                          (double)t->lr_policy.min_lr, (double)t->lr);
    if (v[K_SEED]) {
        int64_t seed;
        if ((rc = vds_get_i64(s, NULL, v[K_SEED], "seed", 0, INT64_MAX, &seed))) return rc;
        t->seed = (uint64_t)seed;
    }
    if (v[K_MATH]) {
        static const char *const names[] = VD_MATH_NAMES;
        const char *m = v[K_MATH]->type == YD_SCALAR ? TXT(v[K_MATH]) : "";
        int k = -1;
        for (int i = 0; i < (int)VD_ARRAY_LEN(names); i++)
            if (!strcmp(m, names[i])) k = i;
        if (k < 0) return vds_err_at(s, mk(v[K_MATH]), "'math' must be fp32, tf32, bf16 or fp16");
        t->math = (vd_math)k;
        t->has_math = true;
    }
    return VD_OK;
}

void vds_train_defaults(vd_train_cfg *t) {
    memset(t, 0, sizeof *t);
    t->batch = 32;
    t->optimizer = VD_OPT_SGD;
    vd_train_optimizer_defaults(t);   /* lr, weight_decay */
    t->momentum = 0.9f;
    t->beta1 = 0.9f;
    t->beta2 = 0.999f;
    t->eps = 1e-8f;
    t->lr_policy.type = VD_LR_FIXED;
    t->lr_policy.gamma = 0.1f;
    t->lr_policy.power = 1.0f;
    t->lr_policy.min_lr = 0.0f;
    t->iters = 0;
    t->epochs = 1;
    t->seed = 1;
}
