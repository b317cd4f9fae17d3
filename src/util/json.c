/* json.c — see json.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "util/json.h"

/* jansson allocates through the counted wrappers (util.h), so its values
 * count in the host memory high-water mark. Set before main, hence before
 * jansson made any value: every block it frees came from these functions.
 * A program that does not link this file keeps jansson's malloc/free,
 * which is just as consistent. No jansson result is released by vdnn with
 * free (json_dumps is not used; json_dumpb writes into vdnn's buffer). */
static void *json_alloc(size_t n) { return vd_malloc(n, NULL); }
__attribute__((constructor)) static void json_alloc_init(void) {
    json_set_alloc_funcs(json_alloc, vd_free);
}

/* Reals: %.17g, enough digits for every double to read back unchanged. */
#define DUMP_FLAGS (JSON_ENCODE_ANY | JSON_REAL_PRECISION(17))

json_t *vd_json_parse(const char *text, size_t n, size_t flags, char *err, size_t errn) {
    json_error_t je;
    json_t *v = json_loadb(text, n, flags | JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!v) snprintf(err, errn, "offset %d: %s", je.position, je.text);
    return v;
}

bool vd_json_utf8(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p++, cp, min;
        int n;
        if (c < 0x80) continue;
        if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; min = 0x10000; }
        else return false;
        for (int k = 0; k < n; k++, p++) {
            if ((*p & 0xC0) != 0x80) return false;     /* the NUL too */
            cp = (cp << 6) | (*p & 0x3Fu);
        }
        /* overlong forms, beyond U+10FFFF, surrogates */
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    }
    return true;
}

bool vd_json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

json_t *vd_json_text(const char *s) {
    if (vd_json_utf8(s)) return json_string(s);
    char *t = vd_strdup(s, NULL);   /* keep the ASCII bytes */
    if (!t) return NULL;
    for (char *c = t; *c; c++)
        if ((unsigned char)*c >= 0x80) *c = '?';
    json_t *v = json_string(t);
    vd_free(t);
    return v;
}

json_t *vd_json_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *vd_json_uint(uint64_t v) {
    return v <= INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
}

bool vd_json_set(json_t *obj, const char *key, json_t *val, bool *ok) {
    if (!*ok) json_decref(val);        /* obj may be gone with an earlier failure */
    else if (json_object_set_new(obj, key, val) != 0) *ok = false;
    return *ok;
}

bool vd_json_push(json_t *arr, json_t *val, bool *ok) {
    if (!*ok) json_decref(val);
    else if (json_array_append_new(arr, val) != 0) *ok = false;
    return *ok;
}

/* One value on one line; false when jansson could not write it. */
static bool dump(FILE *f, const json_t *v) { return json_dumpf(v, f, DUMP_FLAGS) == 0; }

int vd_json_write(FILE *f, const json_t *v, vd_err *e) {
    bool ok = true;
    if (!json_is_object(v)) {
        ok = dump(f, v);
    } else {
        const char *key;
        json_t *m;
        size_t i = 0;
        fputc('{', f);
        /* jansson iterates an object in insertion order */
        json_object_foreach((json_t *)v, key, m) {
            fputs(i++ ? ",\n  " : "\n  ", f);
            json_t *k = json_string_nocheck(key);   /* keys are valid UTF-8 already */
            ok = ok && k && dump(f, k);
            json_decref(k);
            fputs(": ", f);
            if (json_is_array(m) && json_array_size(m) > 0) {
                fputc('[', f);
                for (size_t j = 0; j < json_array_size(m); j++) {
                    fputs(j ? ",\n    " : "\n    ", f);
                    ok = ok && dump(f, json_array_get(m, j));
                }
                fputs("\n  ]", f);
            } else {
                ok = ok && dump(f, m);
            }
        }
        fputs(i ? "\n}" : "}", f);
    }
    fputc('\n', f);
    if (ferror(f)) return vd_errf(e, VD_EIO, "write error");
    if (!ok) return vd_errf(e, VD_ENOMEM, "out of memory writing JSON");
    return VD_OK;
}

static int json_writer(FILE *f, const void *v, vd_err *e) { return vd_json_write(f, v, e); }

int vd_json_save(const char *path, const json_t *v, vd_err *e) {
    return vd_write_stream_atomic(path, json_writer, v, e);
}
