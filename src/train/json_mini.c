/* json_mini.c — see json_mini.h. Recursive descent, no global state. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train/json_mini.h"

typedef struct parser {
    const char *s;
    size_t n, i;
    int depth;
    char *err;
    size_t errn;
    bool failed;
} parser;

static int fail(parser *p, const char *what) {
    if (!p->failed) snprintf(p->err, p->errn, "offset %zu: %s", p->i, what);
    p->failed = true;
    return -1;
}

static void skip_ws(parser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static int hex4(parser *p, unsigned *out) {
    if (p->n - p->i < 4) return fail(p, "truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return fail(p, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

/* Parse a string at p->i (which is at the opening quote). */
static int parse_string(parser *p, char **out, size_t *len) {
    p->i++;
    /* decoded length <= source length */
    size_t start = p->i, cap = 0;
    while (start + cap < p->n && p->s[start + cap] != '"') cap += p->s[start + cap] == '\\' ? 2 : 1;
    char *buf = malloc(cap + 1);
    if (!buf) return fail(p, "out of memory");
    size_t k = 0;
    for (;;) {
        if (p->i >= p->n) { free(buf); return fail(p, "unterminated string"); }
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"') break;
        if (c < 0x20) { free(buf); return fail(p, "control character in string"); }
        if (c != '\\') { buf[k++] = (char)c; continue; }
        if (p->i >= p->n) { free(buf); return fail(p, "unterminated escape"); }
        char esc = p->s[p->i++];
        switch (esc) {
        case '"': buf[k++] = '"'; break;
        case '\\': buf[k++] = '\\'; break;
        case '/': buf[k++] = '/'; break;
        case 'b': buf[k++] = '\b'; break;
        case 'f': buf[k++] = '\f'; break;
        case 'n': buf[k++] = '\n'; break;
        case 'r': buf[k++] = '\r'; break;
        case 't': buf[k++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (hex4(p, &cp)) { free(buf); return -1; }
            if (cp >= 0xD800 && cp < 0xDC00) {
                unsigned lo;
                if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') {
                    free(buf); return fail(p, "unpaired surrogate");
                }
                p->i += 2;
                if (hex4(p, &lo)) { free(buf); return -1; }
                if (lo < 0xDC00 || lo > 0xDFFF) { free(buf); return fail(p, "bad surrogate pair"); }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(buf); return fail(p, "unpaired surrogate");
            }
            /* a \uXXXX escape is 6 source bytes; UTF-8 needs at most 4 (12 for a pair) */
            if (cp < 0x80) buf[k++] = (char)cp;
            else if (cp < 0x800) { buf[k++] = (char)(0xC0 | (cp >> 6)); buf[k++] = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                buf[k++] = (char)(0xE0 | (cp >> 12)); buf[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[k++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[k++] = (char)(0xF0 | (cp >> 18)); buf[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                buf[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[k++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: free(buf); return fail(p, "bad escape in string");
        }
    }
    buf[k] = 0;
    *out = buf;
    *len = k;
    return 0;
}

static int parse_value(parser *p, vj_val *v);

static int parse_number(parser *p, vj_val *v) {
    size_t st = p->i;
    if (p->i < p->n && p->s[p->i] == '-') p->i++;
    if (p->i >= p->n) return fail(p, "truncated number");
    if (p->s[p->i] == '0') p->i++;
    else if (p->s[p->i] >= '1' && p->s[p->i] <= '9')
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    else return fail(p, "bad number");
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        size_t d = p->i;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        if (p->i == d) return fail(p, "bad number fraction");
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        size_t d = p->i;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        if (p->i == d) return fail(p, "bad number exponent");
    }
    size_t len = p->i - st;
    v->type = VJ_NUM;
    v->str = malloc(len + 1);
    if (!v->str) return fail(p, "out of memory");
    memcpy(v->str, p->s + st, len);
    v->str[len] = 0;
    v->len = len;
    return 0;
}

static int push(parser *p, vj_val *v, int *cap) {
    if (v->n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 8;
    vj_val *ni = realloc(v->items, sizeof(vj_val) * (size_t)nc);
    if (!ni) return fail(p, "out of memory");
    v->items = ni;
    if (v->type == VJ_OBJ) {
        char **nk = realloc(v->keys, sizeof(char *) * (size_t)nc);
        if (!nk) return fail(p, "out of memory");
        v->keys = nk;
    }
    *cap = nc;
    return 0;
}

static int parse_container(parser *p, vj_val *v, bool obj) {
    if (++p->depth > 64) return fail(p, "nesting deeper than 64");
    p->i++;
    v->type = obj ? VJ_OBJ : VJ_ARR;
    int cap = 0;
    skip_ws(p);
    char close = obj ? '}' : ']';
    if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; return 0; }
    for (;;) {
        if (push(p, v, &cap)) return -1;
        char *key = NULL;
        if (obj) {
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "expected a string key");
            size_t kl;
            if (parse_string(p, &key, &kl)) return -1;
            if (strlen(key) != kl) { free(key); return fail(p, "NUL in object key"); }
            for (int j = 0; j < v->n; j++)
                if (strcmp(v->keys[j], key) == 0) { free(key); return fail(p, "duplicate key"); }
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') { free(key); return fail(p, "expected ':'"); }
            p->i++;
        }
        vj_val *it = &v->items[v->n];
        memset(it, 0, sizeof *it);
        if (obj) v->keys[v->n] = key;
        v->n++;                  /* counted now so vj_free releases it on error */
        if (parse_value(p, it)) return -1;
        skip_ws(p);
        if (p->i >= p->n) return fail(p, obj ? "unterminated object" : "unterminated array");
        if (p->s[p->i] == ',') { p->i++; continue; }
        if (p->s[p->i] == close) { p->i++; break; }
        return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    p->depth--;
    return 0;
}

static int parse_value(parser *p, vj_val *v) {
    skip_ws(p);
    if (p->i >= p->n) return fail(p, "unexpected end of input");
    char c = p->s[p->i];
    if (c == '{') return parse_container(p, v, true);
    if (c == '[') return parse_container(p, v, false);
    if (c == '"') { v->type = VJ_STR; return parse_string(p, &v->str, &v->len); }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    static const struct { const char *w; vj_type t; bool b; } lits[] = {
        { "true", VJ_BOOL, true }, { "false", VJ_BOOL, false }, { "null", VJ_NULL, false } };
    for (size_t k = 0; k < sizeof lits / sizeof lits[0]; k++) {
        size_t l = strlen(lits[k].w);
        if (p->n - p->i >= l && memcmp(p->s + p->i, lits[k].w, l) == 0) {
            p->i += l;
            v->type = lits[k].t;
            v->b = lits[k].b;
            return 0;
        }
    }
    return fail(p, "unexpected character");
}

static void free_inner(vj_val *v) {
    free(v->str);
    for (int i = 0; i < v->n; i++) {
        free_inner(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void vj_free(vj_val *v) {
    if (!v) return;
    free_inner(v);
    free(v);
}

int vj_parse(const char *text, size_t n, vj_val **out, char *err, size_t errn) {
    *out = NULL;
    parser p = { .s = text, .n = n, .err = err, .errn = errn };
    vj_val *v = calloc(1, sizeof *v);
    if (!v) { snprintf(err, errn, "out of memory"); return -1; }
    if (parse_value(&p, v) == 0) {
        skip_ws(&p);
        if (p.i != p.n) fail(&p, "trailing characters after the JSON value");
    }
    if (p.failed) { vj_free(v); return -1; }
    *out = v;
    return 0;
}

const vj_val *vj_get(const vj_val *obj, const char *key) {
    if (!obj || obj->type != VJ_OBJ) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

bool vj_u64(const vj_val *v, uint64_t *out) {
    if (!v || v->type != VJ_NUM || v->str[0] == '-') return false;
    for (const char *c = v->str; *c; c++)
        if (*c < '0' || *c > '9') return false;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v->str, &end, 10);
    if (errno || *end) return false;
    *out = (uint64_t)x;
    return true;
}
