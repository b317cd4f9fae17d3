/* ydoc.h — a compact YAML document tree for the spec parser.
 *
 * libyaml's own document (yaml_parser_load) costs about 170 bytes a node in
 * blocks the host counters never see: a 16 MiB spec of two-byte list items
 * would take 80 times its size. This tree is built from libyaml's events in
 * three arrays sized exactly by a first pass over the same events: 16 bytes
 * a node, 4 a child, and the scalars' texts in one arena, all allocated with
 * the counted wrappers. The first pass also rejects, before anything is
 * built, collections nested more than VD_SPEC_MAX_NEST deep and a spec whose
 * tree would need more than YD_MAX_RATIO times the text's size plus
 * YD_BASE_BYTES (see yd_load).
 *
 * The tree keeps what the spec parser reads: each node's kind, position,
 * scalar text and style, and a scalar's local tag ('!name'). Aliases point
 * at their anchor's node (shared, as in libyaml's document). Only the spec
 * parser's files include this header (through spec_internal.h). */
#ifndef VD_SPEC_YDOC_H
#define VD_SPEC_YDOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "util/util.h"

/* The tree may take this many times the text's size ... */
#define YD_MAX_RATIO 8
/* ... plus this many bytes (every real spec fits in this alone). */
#define YD_BASE_BYTES (1u << 20)

enum { YD_SCALAR = 1, YD_SEQ = 2, YD_MAP = 3 };

typedef struct yd_node {
    uint32_t line;            /* 1-based line of the node's start */
    unsigned col : 24;        /* 1-based column (clamped to 2^24 - 1) */
    unsigned type : 2;        /* YD_SCALAR, YD_SEQ or YD_MAP */
    unsigned plain : 1;       /* scalar written plain (no quotes, no | or >) */
    unsigned tagged : 1;      /* scalar with a local tag: its text follows the value's NUL */
    uint32_t a;               /* scalar: arena offset of its text; collection: index of its first child in kids */
    uint32_t n;               /* scalar: text length in bytes; sequence: items; mapping: pairs (2n kids) */
} yd_node;

typedef struct yd_doc {
    yd_node *nodes;           /* [n_nodes]; nodes[0] is the root */
    uint32_t *kids;           /* [n_kids] node indices: a sequence's items; a mapping's key, value, key, ... */
    char *arena;              /* [arena_len] NUL-terminated scalar texts (and tags) */
    uint32_t n_nodes, n_kids;
    size_t arena_len;
} yd_doc;

/* Parse text[0..len) (any bytes; UTF-8/16 as libyaml reads them) into d,
 * which the caller zeroes first and yd_free()s afterwards in every case.
 * The stream must hold at most one document: a second one is an error at
 * its root node (after it has parsed). An empty stream gives d->n_nodes 0.
 * Errors, all "FILE:LINE:COL: message" with FILE = `file`:
 *   VD_ESPEC — collections nested more than VD_SPEC_MAX_NEST deep (at the
 *     first one too deep); the tree needing more than YD_MAX_RATIO * len +
 *     YD_BASE_BYTES bytes (at the value that passes the limit); YAML syntax
 *     errors, undefined aliases and duplicate anchors, with libyaml's words;
 *   VD_ENOMEM — out of memory. */
int yd_load(yd_doc *d, const char *text, size_t len, const char *file, vd_err *e);

/* Release d's arrays (zeroed d is fine) and zero it. */
void yd_free(yd_doc *d);

static inline yd_node *yd_root(const yd_doc *d) { return d->n_nodes ? &d->nodes[0] : NULL; }
/* A scalar's text (NUL-terminated; may hold NUL bytes within n). */
static inline const char *yd_text(const yd_doc *d, const yd_node *n) { return d->arena + n->a; }
/* A scalar's local tag ("!d"; its first 64 bytes), or NULL. */
static inline const char *yd_tag(const yd_doc *d, const yd_node *n) {
    return n->tagged ? d->arena + n->a + n->n + 1 : NULL;
}
/* Item i of sequence n; key and value of pair i of mapping n. */
static inline yd_node *yd_item(const yd_doc *d, const yd_node *n, uint32_t i) {
    return &d->nodes[d->kids[n->a + i]];
}
static inline yd_node *yd_key(const yd_doc *d, const yd_node *n, uint32_t i) {
    return &d->nodes[d->kids[n->a + 2 * i]];
}
static inline yd_node *yd_val(const yd_doc *d, const yd_node *n, uint32_t i) {
    return &d->nodes[d->kids[n->a + 2 * i + 1]];
}

#endif
