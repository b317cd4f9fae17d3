/* json.h — reading and writing JSON through jansson (libjansson-dev).
 *
 * Every JSON document vdnn reads (profiles, safetensors headers) goes
 * through vd_json_parse, and every one it writes (plans, traces, profiles,
 * summaries, bench results) through vd_json_write or, for checkpoint
 * headers, json_dumpb with JSON_COMPACT. Strings are escaped by jansson
 * only; there is no other escaper. */
#ifndef VD_UTIL_JSON_H
#define VD_UTIL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include "util/util.h"

/* Parse text[0..n) as one JSON value (any type at the top level). Strict:
 * a duplicate key in an object, a NUL in a string, invalid UTF-8 and
 * trailing characters are errors; duplicates are found through jansson's
 * hash table (linear in the number of keys). flags: 0, or more jansson
 * decoding flags (JSON_DECODE_INT_AS_REAL: every number a real, so that an
 * integer beyond 64 bits is a value the caller can reject by name rather
 * than a syntax error). Returns the value (release with json_decref) or
 * NULL with "offset N: what" written into err. */
json_t *vd_json_parse(const char *text, size_t n, size_t flags, char *err, size_t errn);

/* Is s (NUL-terminated) valid UTF-8, as jansson requires of every string? */
bool vd_json_utf8(const char *s);

/* A JSON integer that is >= 0: true and *out. Reals (1.0) are not. */
bool vd_json_u64(const json_t *v, uint64_t *out);

/* New values that never fail for the reasons json_string / json_real /
 * json_integer do (they return NULL only when out of memory):
 *   vd_json_text  a string; s with invalid UTF-8 (a name cut inside a
 *                 character) has each byte >= 0x80 replaced by '?'
 *   vd_json_real  a real, or null when v is not finite
 *   vd_json_uint  an integer; above INT64_MAX the nearest real */
json_t *vd_json_text(const char *s);
json_t *vd_json_real(double v);
json_t *vd_json_uint(uint64_t v);

/* Set obj[key] = val (stealing val); false when out of memory (val NULL)
 * or obj is not an object. A false sticks in *ok, so a builder can make
 * many calls and check once: once *ok is false, obj is not touched (a
 * failed set released val, which may be the obj of later calls) and val
 * is only released. */
bool vd_json_set(json_t *obj, const char *key, json_t *val, bool *ok);
/* Append val (stolen) to array arr; same convention. */
bool vd_json_push(json_t *arr, json_t *val, bool *ok);

/* Write v to f followed by a newline, in vdnn's layout: a top-level object
 * has one member per line, a member that is an array one element per line,
 * anything deeper stays on one line ({"a": 1, "b": [2, 3]}). Reals are
 * written with 17 significant digits, so they read back to the same double.
 * Returns 0, VD_ENOMEM, or VD_EIO when writing to f failed. */
int vd_json_write(FILE *f, const json_t *v, vd_err *e);
/* vd_json_write of v into the file path, replaced atomically
 * (vd_write_stream_atomic): a failure leaves path as it was. VD_EIO,
 * VD_ENOMEM. */
int vd_json_save(const char *path, const json_t *v, vd_err *e);

#endif
