/* json_mini.h — a small strict JSON reader (RFC 8259) for checkpoint headers.
 *
 * Parses a whole document into a tree. Strings are decoded to UTF-8 (\uXXXX
 * escapes and surrogate pairs included); numbers keep their source text so
 * that 64-bit integers are read exactly. Objects with a duplicate key, depth
 * over 64, trailing garbage, and control characters in strings are errors. */
#ifndef VD_JSON_MINI_H
#define VD_JSON_MINI_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

typedef enum { VJ_NULL, VJ_BOOL, VJ_NUM, VJ_STR, VJ_ARR, VJ_OBJ } vj_type;

typedef struct vj_val {
    vj_type type;
    bool b;                     /* VJ_BOOL */
    char *str;                  /* VJ_STR: decoded (NUL-terminated; len below);
                                   VJ_NUM: the number's source text */
    size_t len;                 /* VJ_STR: bytes in str */
    int n;                      /* VJ_ARR / VJ_OBJ: number of items */
    struct vj_val *items;       /* [n] */
    char **keys;                /* VJ_OBJ: [n] decoded keys */
} vj_val;

/* Parse text[0..n). On success *out is a tree the caller frees with vj_free.
 * On error returns -1 and writes "offset N: what" into err. */
int vj_parse(const char *text, size_t n, vj_val **out, char *err, size_t errn);
void vj_free(vj_val *v);
/* Member of an object by key, or NULL. */
const vj_val *vj_get(const vj_val *obj, const char *key);
/* A VJ_NUM that is a non-negative integer fitting uint64: true and *out. */
bool vj_u64(const vj_val *v, uint64_t *out);

#endif
