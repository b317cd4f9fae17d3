/* readers.c — typed value readers over the spec's ydoc tree.
 *
 * Each reader takes a node, substitutes ${} in its text (expr.c), checks
 * the value's form and range and reports a bad one as
 * "FILE:LINE:COL: message" at the node (vds_err_at), naming the key. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "spec/spec_internal.h"

/* ======================================================================
 * Scalars
 * ====================================================================== */

const char *vds_node_kind(const yd_node *n) {
    return n->type == YD_SEQ ? "a list" : n->type == YD_MAP ? "a mapping" : "a scalar";
}

/* The text of scalar node n (key `what` for messages), ${} substituted.
 * *out: malloc'd. */
int vds_scalar(sp *s, const scope *sc, yd_node *n, const char *what, char **out) {
    *out = NULL;
    if (n->type != YD_SCALAR)
        return vds_err_at(s, mk(n), "'%s' must be a single value, not %s", what, vds_node_kind(n));
    const char *t = TXT(n);
    if (strlen(t) != n->n)
        return vds_err_at(s, mk(n), "'%s' contains a NUL byte", what);
    if (yd_tag(&s->doc, n))
        return vds_err_at(s, mk(n), "'%s' has the YAML tag '%.64s'; quote a value that starts with '!'",
                          what, yd_tag(&s->doc, n));
    return vds_subst(s, sc, mk(n), t, out);
}

bool vds_is_null_scalar(const sp *s, const yd_node *n) {
    if (n->type != YD_SCALAR || !n->plain) return false;
    const char *t = TXT(n);
    return !*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL");
}

/* ======================================================================
 * Mapping keys
 * ====================================================================== */

int vds_find_key(const char *const *keys, int n, const char *k) {
    for (int i = 0; i < n; i++)
        if (!strcmp(keys[i], k)) return i;
    return -1;
}

/* Check the keys of mapping m (`what` names it in messages): each is one of
 * allowed[0..n) and appears once; vals[i] = value node of allowed[i] or NULL.
 * A key found in `elsewhere` (NULL-terminated, may be NULL) gets "does not
 * apply to <elsewhere_what>" instead of "unknown key". */
int vds_map_keys(sp *s, yd_node *m, const char *what, const char *const *allowed, int n,
                 const char *const *elsewhere, const char *elsewhere_what, yd_node **vals) {
    if (m->type != YD_MAP)
        return vds_err_at(s, mk(m), "%s must be a mapping (key: value), not %s", what, vds_node_kind(m));
    for (int i = 0; i < n; i++) vals[i] = NULL;
    for (uint32_t pi = 0; pi < m->n; pi++) {
        yd_node *k = KEY(m, pi), *v = VAL(m, pi);
        if (k->type != YD_SCALAR)
            return vds_err_at(s, mk(k), "keys of %s must be plain words, not %s", what, vds_node_kind(k));
        const char *key = TXT(k);
        if (strlen(key) != k->n)
            return vds_err_at(s, mk(k), "a key of %s contains a NUL byte", what);
        int j = vds_find_key(allowed, n, key);
        if (j < 0) {
            if (elsewhere)
                for (int i = 0; elsewhere[i]; i++)
                    if (!strcmp(elsewhere[i], key))
                        return vds_err_at(s, mk(k), "key '%.64s' does not apply to %s", key, elsewhere_what);
            const char *sug = vd_suggest(key, allowed, n);
            if (sug)
                return vds_err_at(s, mk(k), "unknown key '%.64s' in %s (did you mean '%s'?)", key, what, sug);
            char list[512];
            size_t u = 0;
            list[0] = 0;
            for (int i = 0; i < n && u < sizeof list; i++) {
                int w = snprintf(list + u, sizeof list - u, "%s%s", i ? ", " : "", allowed[i]);
                if (w < 0) break;
                u += (size_t)w;
            }
            return vds_err_at(s, mk(k), "unknown key '%.64s' in %s (expected one of: %s)", key, what, list);
        }
        if (vals[j]) return vds_err_at(s, mk(k), "duplicate key '%s' in %s", key, what);
        vals[j] = v;
    }
    return VD_OK;
}

/* ======================================================================
 * Value readers (all substitute ${} first)
 * ====================================================================== */

int vds_get_i64(sp *s, const scope *sc, yd_node *n, const char *key, int64_t lo, int64_t hi,
                int64_t *out) {
    char *t;
    int rc = vds_scalar(s, sc, n, key, &t);
    if (rc) return rc;
    int64_t v;
    if (!vds_parse_int(t, &v)) {
        rc = vds_err_at(s, mk(n), "'%s' must be an integer, got '%.64s'", key, t);
    } else if (v < lo) {
        rc = lo == 1 ? vds_err_at(s, mk(n), "'%s' must be positive, got %lld", key, (long long)v)
           : lo == 0 ? vds_err_at(s, mk(n), "'%s' must not be negative, got %lld", key, (long long)v)
                     : vds_err_at(s, mk(n), "'%s' must be at least %lld, got %lld", key, (long long)lo,
                                  (long long)v);
    } else if (v > hi) {
        rc = vds_err_at(s, mk(n), "'%s' is too large (at most %lld), got %lld", key, (long long)hi,
                        (long long)v);
    } else {
        *out = v;
    }
    vd_free(t);
    return rc;
}

int vds_get_int(sp *s, const scope *sc, yd_node *n, const char *key, int lo, int *out) {
    int64_t v;
    int rc = vds_get_i64(s, sc, n, key, lo, INT32_MAX, &v);
    if (!rc) *out = (int)v;
    return rc;
}

/* int or [h, w] */
int vds_get_pair(sp *s, const scope *sc, yd_node *n, const char *key, int lo, int *h, int *w) {
    if (n->type == YD_SCALAR) {
        int rc = vds_get_int(s, sc, n, key, lo, h);
        if (!rc) *w = *h;
        return rc;
    }
    if (n->type == YD_SEQ && n->n == 2) {
        yd_node *a = ITEM(n, 0), *b = ITEM(n, 1);
        if (a->type == YD_SCALAR && b->type == YD_SCALAR) {
            int rc = vds_get_int(s, sc, a, key, lo, h);
            return rc ? rc : vds_get_int(s, sc, b, key, lo, w);
        }
    }
    return vds_err_at(s, mk(n), "'%s' must be an integer or [height, width]", key);
}

/* Float in a range given by lo/hi and open/closed ends; `range` describes it. */
int vds_get_float(sp *s, const scope *sc, yd_node *n, const char *key, double lo, bool lo_open,
                  double hi, bool hi_open, const char *range, double *out) {
    char *t;
    int rc = vds_scalar(s, sc, n, key, &t);
    if (rc) return rc;
    bool ok = *t != 0;
    for (const char *p = t; *p; p++)
        if (!strchr("0123456789+-.eE", *p)) ok = false;
    double v = 0;
    if (ok) {
        char *end;
        errno = 0;
        v = strtod(t, &end);
        ok = !*end && errno != ERANGE && isfinite(v);
    }
    if (!ok) rc = vds_err_at(s, mk(n), "'%s' must be a number, got '%.64s'", key, t);
    else if (v < lo || (lo_open && v == lo) || v > hi || (hi_open && v == hi))
        rc = vds_err_at(s, mk(n), "'%s' must be %s, got %.64s", key, range, t);
    else *out = v;
    vd_free(t);
    return rc;
}

int vds_get_bool(sp *s, const scope *sc, yd_node *n, const char *key, bool *out) {
    char *t;
    int rc = vds_scalar(s, sc, n, key, &t);
    if (rc) return rc;
    if (!vds_parse_bool_text(t, out)) rc = vds_err_at(s, mk(n), "'%s' must be true or false, got '%.64s'", key, t);
    vd_free(t);
    return rc;
}

/* Evaluate a condition: with ${} the substituted text must be a boolean or
 * integer; without, the text itself is an expression. */
int vds_get_cond(sp *s, const scope *sc, yd_node *n, bool *out) {
    if (n->type != YD_SCALAR)
        return vds_err_at(s, mk(n), "'if' must be a single value, not %s", vds_node_kind(n));
    const char *raw = TXT(n);
    if (strlen(raw) != n->n) return vds_err_at(s, mk(n), "'if' contains a NUL byte");
    if (yd_tag(&s->doc, n))
        return vds_err_at(s, mk(n), "'if' has the YAML tag '%.64s'; quote a condition that starts with "
                          "'!', e.g. if: \"!downsample\"", yd_tag(&s->doc, n));
    char *t;
    int rc;
    if (strstr(raw, "${")) {
        if ((rc = vds_subst(s, sc, mk(n), raw, &t))) return rc;
    } else {
        if (strlen(raw) > MAX_VALUE) return vds_err_at(s, mk(n), "value is too long");
        if ((rc = vds_eval(s, sc, mk(n), raw, &t))) return rc;
    }
    int64_t v;
    if (vds_parse_bool_text(t, out)) rc = VD_OK;
    else if (vds_parse_int(t, &v)) *out = v != 0;
    else rc = vds_err_at(s, mk(n), "'if' must be true, false or an integer, got '%.64s'", t);
    vd_free(t);
    return rc;
}
