/* expr.c — the ${} expression language of specs.
 *
 * ${expr} in a scalar is replaced by its value: a lone variable name gives
 * that variable's text; anything else is a C-like 64-bit integer
 * expression over integer and boolean variables, with ?:, ||, &&,
 * comparisons, + - * / % and unary - + !. Overflow and division by zero
 * are errors only where the value is used, not on the side of &&, || or
 * ?: that is not taken (which is still parsed, its variables looked up).
 * Variables come from the scope: template parameters, `name`, `input` and
 * repeat indices. The grammar is in man/vdnn-net.5 (Expressions). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "spec/spec_internal.h"

#define MAX_EXPR_DEPTH 64     /* parentheses / unary operators */

/* t[0..n) is a word: a letter or _, then letters, digits and _. */
static bool is_ident_n(const char *t, size_t n) {
    if (!n || !(isalpha((unsigned char)*t) || *t == '_')) return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)t[i]) || t[i] == '_')) return false;
    return true;
}

bool vds_is_ident(const char *t) { return is_ident_n(t, strlen(t)); }

/* Strict decimal integer with optional sign. */
bool vds_parse_int(const char *t, int64_t *out) {
    const char *p = t;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p)) return false;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q)) return false;
    errno = 0;
    char *end;
    long long v = strtoll(t, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool vds_parse_bool_text(const char *t, bool *out) {
    if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE") || !strcmp(t, "1")) {
        *out = true;
        return true;
    }
    if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE") || !strcmp(t, "0")) {
        *out = false;
        return true;
    }
    return false;
}

const var *vds_scope_get(const scope *sc, const char *name, size_t len) {
    for (; sc; sc = sc->parent)
        for (int i = sc->n - 1; i >= 0; i--)
            if (strlen(sc->v[i].name) == len && !strncmp(sc->v[i].name, name, len)) return &sc->v[i];
    return NULL;
}

typedef struct ex {
    sp *s;
    const scope *sc;
    mark m;
    const char *src;          /* the expression text (for messages) */
    const char *p;
    int depth;
    bool bad;
} ex;

__attribute__((format(printf, 2, 3)))
static void ex_fail(ex *x, const char *fmt, ...) {
    if (x->bad) return;
    x->bad = true;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vds_err_at(x->s, x->m, "in '${%.120s}': %s", x->src, msg);
}

static void ex_ws(ex *x) { while (*x->p == ' ' || *x->p == '\t') x->p++; }

/* The unknown variable st[0..len). */
static void ex_unknown_var(ex *x, const char *st, size_t len) {
    const char *c[MAX_PARAMS + 8];
    int n = 0;
    for (const scope *sc = x->sc; sc; sc = sc->parent)
        for (int i = 0; i < sc->n && n < (int)VD_ARRAY_LEN(c); i++) c[n++] = sc->v[i].name;
    char *name = vd_strfmt(x->s->e, "%.*s", (int)len, st);
    if (!name) {
        x->bad = true;
        vds_nomem(x->s);
        return;
    }
    const char *sug = vd_suggest(name, c, n);
    if (sug) ex_fail(x, "unknown variable '%.64s' (did you mean '%s'?)", name, sug);
    else ex_fail(x, "unknown variable '%.64s'", name);
    vd_free(name);
}

static int64_t ex_expr(ex *x, bool live);

static int64_t ex_primary(ex *x, bool live) {
    ex_ws(x);
    if (x->bad) return 0;
    unsigned char c = (unsigned char)*x->p;
    int64_t v = 0;
    if (c == '(') {
        x->p++;
        v = ex_expr(x, live);
        ex_ws(x);
        if (x->bad) return 0;
        if (*x->p != ')') { ex_fail(x, "expected ')'"); return 0; }
        x->p++;
    } else if (isdigit(c)) {
        while (isdigit((unsigned char)*x->p)) {
            int d = *x->p++ - '0';
            if (v > (INT64_MAX - d) / 10) { ex_fail(x, "number too large"); return 0; }
            v = v * 10 + d;
        }
    } else if (isalpha(c) || c == '_') {
        const char *st = x->p;
        while (isalnum((unsigned char)*x->p) || *x->p == '_') x->p++;
        size_t len = (size_t)(x->p - st); /* at most MAX_VALUE: the expression's length */
        const var *vr = vds_scope_get(x->sc, st, len);
        bool b;
        if (!vr) {
            if (len == 4 && !strncmp(st, "true", 4)) return 1;
            if (len == 5 && !strncmp(st, "false", 5)) return 0;
            ex_unknown_var(x, st, len);
            return 0;
        }
        if (vds_parse_int(vr->val, &v)) return v;
        if (vds_parse_bool_text(vr->val, &b)) return b;
        ex_fail(x, "variable '%.64s' is '%.64s', not an integer", vr->name, vr->val);
        return 0;
    } else if (!c) {
        ex_fail(x, "unexpected end of expression");
    } else {
        ex_fail(x, "unexpected '%c'", isprint(c) ? c : '?');
    }
    return v;
}

static int64_t ex_unary(ex *x, bool live) {
    ex_ws(x);
    if (x->bad) return 0;
    if (++x->depth > MAX_EXPR_DEPTH) { ex_fail(x, "expression nested too deeply"); return 0; }
    int64_t v;
    char c = *x->p;
    if (c == '-' || c == '+' || c == '!') {
        x->p++;
        v = ex_unary(x, live);
        if (c == '-') {
            if (v == INT64_MIN) { if (live) ex_fail(x, "integer overflow"); v = 0; }
            else v = -v;
        } else if (c == '!') {
            v = !v;
        }
    } else {
        v = ex_primary(x, live);
    }
    x->depth--;
    return v;
}

static int64_t ex_mul(ex *x, bool live) {
    int64_t a = ex_unary(x, live);
    for (;;) {
        ex_ws(x);
        char op = *x->p;
        if (x->bad || (op != '*' && op != '/' && op != '%')) return a;
        x->p++;
        int64_t b = ex_unary(x, live), r = 0;
        if (op == '*') {
            if (__builtin_mul_overflow(a, b, &r)) { if (live) ex_fail(x, "integer overflow"); r = 0; }
        } else if (b == 0 || (a == INT64_MIN && b == -1)) {
            if (live) ex_fail(x, b == 0 ? "division by zero" : "integer overflow");
        } else {
            r = op == '/' ? a / b : a % b;
        }
        a = r;
    }
}

static int64_t ex_add(ex *x, bool live) {
    int64_t a = ex_mul(x, live);
    for (;;) {
        ex_ws(x);
        char op = *x->p;
        if (x->bad || (op != '+' && op != '-')) return a;
        x->p++;
        int64_t b = ex_mul(x, live), r;
        if (op == '+' ? __builtin_add_overflow(a, b, &r) : __builtin_sub_overflow(a, b, &r)) {
            if (live) ex_fail(x, "integer overflow");
            r = 0;
        }
        a = r;
    }
}

static int64_t ex_cmp(ex *x, bool live) {
    int64_t a = ex_add(x, live);
    ex_ws(x);
    const char *p = x->p;
    int op = 0; /* 1 == 2 != 3 <= 4 >= 5 < 6 > */
    if (p[0] == '=' && p[1] == '=') op = 1;
    else if (p[0] == '!' && p[1] == '=') op = 2;
    else if (p[0] == '<' && p[1] == '=') op = 3;
    else if (p[0] == '>' && p[1] == '=') op = 4;
    else if (p[0] == '<') op = 5;
    else if (p[0] == '>') op = 6;
    if (!op || x->bad) return a;
    x->p += op <= 4 ? 2 : 1;
    int64_t b = ex_add(x, live);
    switch (op) {
    case 1: return a == b;
    case 2: return a != b;
    case 3: return a <= b;
    case 4: return a >= b;
    case 5: return a < b;
    default: return a > b;
    }
}

static int64_t ex_and(ex *x, bool live) {
    int64_t a = ex_cmp(x, live);
    for (;;) {
        ex_ws(x);
        if (x->bad || x->p[0] != '&' || x->p[1] != '&') return a;
        x->p += 2;
        int64_t b = ex_cmp(x, live && a);
        a = a && b;
    }
}

static int64_t ex_or(ex *x, bool live) {
    int64_t a = ex_and(x, live);
    for (;;) {
        ex_ws(x);
        if (x->bad || x->p[0] != '|' || x->p[1] != '|') return a;
        x->p += 2;
        int64_t b = ex_and(x, live && !a);
        a = a || b;
    }
}

static int64_t ex_expr(ex *x, bool live) {
    if (++x->depth > MAX_EXPR_DEPTH) { ex_fail(x, "expression nested too deeply"); return 0; }
    int64_t c = ex_or(x, live);
    ex_ws(x);
    if (!x->bad && *x->p == '?') {
        x->p++;
        int64_t a = ex_expr(x, live && c);
        ex_ws(x);
        if (!x->bad && *x->p != ':') ex_fail(x, "expected ':' after '?'");
        if (x->bad) { x->depth--; return 0; }
        x->p++;
        int64_t b = ex_expr(x, live && !c);
        c = c ? a : b;
    }
    x->depth--;
    return c;
}

/* Evaluate expression text `src` (NUL-terminated). A lone variable name
 * yields that variable's text; anything else is an integer expression.
 * *out: malloc'd. */
int vds_eval(sp *s, const scope *sc, mark m, const char *src, char **out) {
    const char *a = src, *b = src + strlen(src);
    while (*a == ' ' || *a == '\t') a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
    size_t len = (size_t)(b - a);
    if (is_ident_n(a, len)) {
        const var *vr = vds_scope_get(sc, a, len);
        if (vr) {
            *out = vd_strdup(vr->val, s->e);
            return *out ? VD_OK : vds_nomem(s);
        }
    }
    ex x = {s, sc, m, src, src, 0, false};
    int64_t v = ex_expr(&x, true);
    ex_ws(&x);
    if (!x.bad && *x.p) {
        unsigned char c = (unsigned char)*x.p;
        ex_fail(&x, "unexpected '%c'", isprint(c) ? c : '?');
    }
    if (x.bad) return s->e ? s->e->code : VD_ESPEC;
    *out = vd_strfmt(s->e, "%lld", (long long)v);
    return *out ? VD_OK : vds_nomem(s);
}

/* Replace every ${expr} in `in`. *out: malloc'd. */
int vds_subst(sp *s, const scope *sc, mark m, const char *in, char **out) {
    *out = NULL;
    if (!strstr(in, "${")) {
        if (strlen(in) > MAX_VALUE) return vds_err_at(s, m, "value is too long (more than %d bytes)", MAX_VALUE);
        *out = vd_strdup(in, s->e);
        return *out ? VD_OK : vds_nomem(s);
    }
    char *buf = vd_malloc(MAX_VALUE + 1, s->e);
    if (!buf) return vds_nomem(s);
    size_t n = 0;
    const char *p = in;
    int rc = VD_OK;
    while (*p) {
        const char *st = strstr(p, "${");
        size_t lit = st ? (size_t)(st - p) : strlen(p);
        if (n + lit > MAX_VALUE) {
            rc = vds_err_at(s, m, "value is too long (more than %d bytes)", MAX_VALUE);
            break;
        }
        memcpy(buf + n, p, lit);
        n += lit;
        if (!st) break;
        const char *en = strchr(st + 2, '}');
        if (!en) { rc = vds_err_at(s, m, "unterminated '${' in '%.120s'", in); break; }
        size_t el = (size_t)(en - st - 2);
        if (el > MAX_VALUE) { rc = vds_err_at(s, m, "expression is too long"); break; }
        char *expr = vd_malloc(el + 1, s->e);
        if (!expr) { rc = vds_nomem(s); break; }
        memcpy(expr, st + 2, el);
        expr[el] = 0;
        char *val = NULL;
        rc = vds_eval(s, sc, m, expr, &val);
        vd_free(expr);
        if (rc) break;
        size_t vl = strlen(val);
        if (n + vl > MAX_VALUE) {
            vd_free(val);
            rc = vds_err_at(s, m, "value is too long (more than %d bytes)", MAX_VALUE);
            break;
        }
        memcpy(buf + n, val, vl);
        n += vl;
        vd_free(val);
        p = en + 1;
    }
    if (rc) { vd_free(buf); return rc; }
    buf[n] = 0;
    *out = buf;
    return VD_OK;
}
