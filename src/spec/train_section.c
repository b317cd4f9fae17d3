/* train_section.c — the spec's train: section.
 *
 * Keys batch, lr, momentum, weight_decay, lr_policy (a type name or a
 * mapping with the type's own keys), iters or epochs, seed and math, read
 * into vd_train_cfg over the defaults of vds_train_defaults. The keys and
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

int vds_parse_train(sp *s, yd_node *n) {
    static const char *const keys[] = {"batch", "lr", "momentum", "weight_decay", "lr_policy",
                                       "iters", "epochs", "seed", "math"};
    yd_node *v[9];
    int rc = vds_map_keys(s, n, "'train'", keys, 9, NULL, NULL, v);
    if (rc) return rc;
    vd_train_cfg *t = &s->net->train;
    double d;
    if (v[0] && (rc = vds_get_int(s, NULL, v[0], "batch", 1, &t->batch))) return rc;
    if (v[1]) {
        if ((rc = vds_get_float(s, NULL, v[1], "lr", 0, true, 1e30, false, "positive", &d))) return rc;
        t->lr = (float)d;
    }
    if (v[2]) {
        if ((rc = vds_get_float(s, NULL, v[2], "momentum", 0, false, 1, true, "in [0, 1)", &d))) return rc;
        t->momentum = (float)d;
    }
    if (v[3]) {
        if ((rc = vds_get_float(s, NULL, v[3], "weight_decay", 0, false, 1e30, false, "non-negative", &d))) return rc;
        t->weight_decay = (float)d;
    }
    if (v[4] && (rc = parse_lr_policy(s, v[4], &t->lr_policy))) return rc;
    if (v[5] && (rc = vds_get_i64(s, NULL, v[5], "iters", 1, INT64_MAX, &t->iters))) return rc;
    if (v[6] && (rc = vds_get_i64(s, NULL, v[6], "epochs", 1, INT64_MAX, &t->epochs))) return rc;
    if (v[5] && v[6]) return vds_err_at(s, mk(v[6]), "give either 'iters' or 'epochs', not both");
    if (v[5]) t->epochs = 0;
    if (v[4] && t->lr_policy.type == VD_LR_COSINE && t->lr_policy.min_lr > t->lr)
        return vds_err_at(s, mk(v[4]), "lr_policy 'min_lr' (%g) must not exceed 'lr' (%g)",
                          (double)t->lr_policy.min_lr, (double)t->lr);
    if (v[7]) {
        int64_t seed;
        if ((rc = vds_get_i64(s, NULL, v[7], "seed", 0, INT64_MAX, &seed))) return rc;
        t->seed = (uint64_t)seed;
    }
    if (v[8]) {
        static const char *const names[] = VD_MATH_NAMES;
        const char *m = v[8]->type == YD_SCALAR ? TXT(v[8]) : "";
        int k = -1;
        for (int i = 0; i < (int)VD_ARRAY_LEN(names); i++)
            if (!strcmp(m, names[i])) k = i;
        if (k < 0) return vds_err_at(s, mk(v[8]), "'math' must be fp32, tf32, bf16 or fp16");
        t->math = (vd_math)k;
        t->has_math = true;
    }
    return VD_OK;
}

void vds_train_defaults(vd_train_cfg *t) {
    memset(t, 0, sizeof *t);
    t->batch = 32;
    t->lr = VD_DEFAULT_LR;
    t->momentum = 0.9f;
    t->weight_decay = 0.0005f;
    t->lr_policy.type = VD_LR_FIXED;
    t->lr_policy.gamma = 0.1f;
    t->lr_policy.power = 1.0f;
    t->lr_policy.min_lr = 0.0f;
    t->iters = 0;
    t->epochs = 1;
    t->seed = 1;
}
