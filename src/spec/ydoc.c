/* ydoc.c — libyaml events -> the compact counted tree of ydoc.h.
 *
 * Two passes over the events of the same text. The first counts what the
 * tree needs (nodes, children, arena bytes, anchors, the deepest stack of
 * children waiting for their collection to end) and stops at the first
 * collection nested too deep or at the value where the tree would pass its
 * memory limit; it leaves YAML errors to the second pass, which builds the
 * tree in arrays of exactly those sizes and reports them as libyaml's
 * composer (yaml_parser_load) words them. */
#include <stdio.h>
#include <string.h>
#include <yaml.h>
#include "spec/spec.h"
#include "spec/ydoc.h"

#define TAG_KEEP 64           /* bytes of a local tag kept (messages print at most 64) */
#define COL_MAX ((1u << 24) - 1)

_Static_assert(sizeof(yd_node) == 16, "yd_node is meant to be 16 bytes");

/* Bytes the first pass charges for each part of the tree (upper bounds of
 * what the second pass allocates): a node; a child (its slot in kids and in
 * the stack of waiting children); an anchor (its hash slot: the table holds
 * a power of two of at least twice the anchors, 8 bytes each). */
enum { COST_NODE = (int)sizeof(yd_node), COST_KID = 8, COST_ANCHOR = 32 };

/* ======================================================================
 * Errors
 * ====================================================================== */

static void mark_of_offset(const char *text, size_t len, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') { (*line)++; *col = 1; }
        else if (((unsigned char)text[i] & 0xC0) != 0x80) (*col)++;
    }
}

/* "FILE:L:C: YAML syntax error: PROBLEM[ (CONTEXT at line N)]". */
static int syntax_error(const char *file, vd_err *e, int line, int col, const char *problem,
                        const char *context, int context_line) {
    if (context)
        return vd_errf(e, VD_ESPEC, "%s:%d:%d: YAML syntax error: %s (%s at line %d)", file, line, col,
                       problem, context, context_line);
    return vd_errf(e, VD_ESPEC, "%s:%d:%d: YAML syntax error: %s", file, line, col, problem);
}

/* The error libyaml's parser stopped at. */
static int parser_error(yaml_parser_t *p, const char *text, size_t len, const char *file, vd_err *e) {
    if (p->error == YAML_MEMORY_ERROR) return vd_errf(e, VD_ENOMEM, "out of memory parsing %s", file);
    int line, col;
    if (p->error == YAML_READER_ERROR) {
        mark_of_offset(text, len, p->problem_offset, &line, &col);
    } else {
        line = (int)p->problem_mark.line + 1;
        col = (int)p->problem_mark.column + 1;
    }
    return syntax_error(file, e, line, col, p->problem ? p->problem : "invalid YAML", p->context,
                        (int)p->context_mark.line + 1);
}

/* ======================================================================
 * First pass: sizes and limits
 * ====================================================================== */

typedef struct sizes {
    uint64_t nodes, kids, arena, pending_max, anchors_max; /* anchors_max: in one document */
} sizes;

static const char *event_anchor(const yaml_event_t *ev) {
    switch (ev->type) {
    case YAML_SCALAR_EVENT: return (const char *)ev->data.scalar.anchor;
    case YAML_SEQUENCE_START_EVENT: return (const char *)ev->data.sequence_start.anchor;
    case YAML_MAPPING_START_EVENT: return (const char *)ev->data.mapping_start.anchor;
    default: return NULL;
    }
}

/* A scalar's tag worth keeping: a local one ('!d'), not the non-specific "!"
 * (libyaml's document gives that the default string tag). */
static const char *local_tag(const yaml_event_t *ev) {
    const char *t = (const char *)ev->data.scalar.tag;
    return t && t[0] == '!' && t[1] ? t : NULL;
}

static size_t tag_bytes(const char *tag) {
    size_t n = strlen(tag);
    return (n < TAG_KEEP ? n : TAG_KEEP) + 1;
}

static int measure(const char *text, size_t len, const char *file, sizes *z, vd_err *e) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return vd_errf(e, VD_ENOMEM, "out of memory starting the YAML parser");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    const uint64_t limit = (uint64_t)YD_MAX_RATIO * len + YD_BASE_BYTES;
    uint64_t cost = 0, pending = 0, doc_anchors = 0;
    uint64_t open[VD_SPEC_MAX_NEST + 1]; /* pending count when each open collection started */
    int depth = 0, rc = VD_OK;
    memset(z, 0, sizeof *z);
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) break; /* reported by the second pass */
        yaml_event_type_t t = ev.type;
        if (t == YAML_DOCUMENT_START_EVENT) doc_anchors = 0;
        if (t == YAML_SCALAR_EVENT || t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT ||
            t == YAML_ALIAS_EVENT) {
            if (depth > 0) {
                z->kids++;
                if (++pending > z->pending_max) z->pending_max = pending;
                cost += COST_KID;
            }
            if (t != YAML_ALIAS_EVENT) {
                z->nodes++;
                cost += COST_NODE;
                const char *anchor = event_anchor(&ev);
                if (anchor) {
                    size_t b = strlen(anchor) + 1;
                    z->arena += b;
                    cost += COST_ANCHOR + b;
                    if (++doc_anchors > z->anchors_max) z->anchors_max = doc_anchors;
                }
            }
            if (t == YAML_SCALAR_EVENT) {
                size_t b = ev.data.scalar.length + 1;
                const char *tag = local_tag(&ev);
                if (tag) b += tag_bytes(tag);
                z->arena += b;
                cost += b;
            } else if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
                if (depth >= VD_SPEC_MAX_NEST)
                    rc = vd_errf(e, VD_ESPEC, "%s:%d:%d: collections nested more than %d deep", file,
                                 (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1, VD_SPEC_MAX_NEST);
                else open[depth++] = pending;
            }
            if (!rc && cost > limit)
                rc = vd_errf(e, VD_ESPEC, "%s:%d:%d: the spec holds too many YAML values for its size: "
                             "parsed, they would take more than %d times its %zu bytes plus %u KiB",
                             file, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1, YD_MAX_RATIO,
                             len, YD_BASE_BYTES >> 10);
        } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
            if (depth > 0) pending = open[--depth]; /* the items move to kids */
        }
        yaml_event_delete(&ev);
        if (rc || t == YAML_STREAM_END_EVENT) break;
    }
    yaml_parser_delete(&p);
    return rc;
}

/* ======================================================================
 * Second pass: the tree
 * ====================================================================== */

typedef struct anchor_slot {
    uint32_t name;            /* arena offset of the anchor's name */
    uint32_t node;            /* UINT32_MAX = empty */
} anchor_slot;

typedef struct builder {
    yd_doc *d;
    const sizes *z;
    uint32_t *pend;           /* [z->pending_max] children waiting for their collection's end */
    uint64_t pend_n;
    anchor_slot *anchors;     /* [anchors_cap] open addressing; anchors_cap a power of two or 0 */
    size_t anchors_cap;
    struct { uint32_t node; uint64_t pend_start; } open[VD_SPEC_MAX_NEST + 1];
    int depth;
} builder;

static uint64_t fnv(const char *k) {
    uint64_t h = 1469598103934665603ull;
    for (; *k; k++) h = (h ^ (unsigned char)*k) * 1099511628211ull;
    return h;
}

static anchor_slot *anchor_find(builder *b, const char *name) {
    if (!b->anchors_cap) return NULL;
    size_t mask = b->anchors_cap - 1;
    for (size_t i = fnv(name) & mask;; i = (i + 1) & mask) {
        anchor_slot *s = &b->anchors[i];
        if (s->node == UINT32_MAX || !strcmp(b->d->arena + s->name, name)) return s;
    }
}

/* Copy n bytes to the arena (NUL added); its offset in *off. */
static bool arena_put(builder *b, const char *src, size_t n, uint32_t *off) {
    yd_doc *d = b->d;
    if (d->arena_len + n + 1 > b->z->arena) return false;
    *off = (uint32_t)d->arena_len;
    memcpy(d->arena + d->arena_len, src, n);
    d->arena[d->arena_len + n] = 0;
    d->arena_len += n + 1;
    return true;
}

/* The node event ev as node *id (new, or the alias's target). */
static int add_node(builder *b, const yaml_event_t *ev, uint32_t *id, const char *file, vd_err *e) {
    yd_doc *d = b->d;
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    if (ev->type == YAML_ALIAS_EVENT) {
        anchor_slot *s = anchor_find(b, (const char *)ev->data.alias.anchor);
        if (!s || s->node == UINT32_MAX) return syntax_error(file, e, line, col, "found undefined alias", NULL, 0);
        *id = s->node;
        return VD_OK;
    }
    if (d->n_nodes >= b->z->nodes) return vd_errf(e, VD_EINTERNAL, "%s: the YAML tree outgrew its count", file);
    yd_node *n = &d->nodes[d->n_nodes];
    memset(n, 0, sizeof *n);
    n->line = (uint32_t)line;
    n->col = (unsigned)col < COL_MAX ? (unsigned)col : COL_MAX;
    if (ev->type == YAML_SCALAR_EVENT) {
        n->type = YD_SCALAR;
        n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        n->n = (uint32_t)ev->data.scalar.length;
        const char *tag = local_tag(ev);
        bool ok = arena_put(b, (const char *)ev->data.scalar.value, ev->data.scalar.length, &n->a);
        uint32_t tag_off;
        if (ok && tag) {
            n->tagged = 1;
            ok = arena_put(b, tag, tag_bytes(tag) - 1, &tag_off);
        }
        if (!ok) return vd_errf(e, VD_EINTERNAL, "%s: the YAML tree outgrew its count", file);
    } else {
        n->type = ev->type == YAML_SEQUENCE_START_EVENT ? YD_SEQ : YD_MAP;
    }
    *id = d->n_nodes++;
    const char *anchor = event_anchor(ev);
    if (anchor) {
        anchor_slot *s = anchor_find(b, anchor);
        if (!s) return vd_errf(e, VD_EINTERNAL, "%s: the YAML anchors outgrew their count", file);
        if (s->node != UINT32_MAX)
            return syntax_error(file, e, line, col, "second occurrence", "found duplicate anchor; first occurrence",
                                (int)d->nodes[s->node].line);
        if (!arena_put(b, anchor, strlen(anchor), &s->name))
            return vd_errf(e, VD_EINTERNAL, "%s: the YAML tree outgrew its count", file);
        s->node = *id;
    }
    return VD_OK;
}

static int build(yd_doc *d, const sizes *z, const char *text, size_t len, const char *file, vd_err *e) {
    builder b;
    memset(&b, 0, sizeof b);
    b.d = d;
    b.z = z;
    if (z->anchors_max) {
        b.anchors_cap = 4;
        while (b.anchors_cap < 2 * z->anchors_max) b.anchors_cap *= 2;
    }
    d->nodes = vd_malloc((z->nodes ? z->nodes : 1) * sizeof *d->nodes, e);
    d->kids = vd_malloc((z->kids ? z->kids : 1) * sizeof *d->kids, e);
    d->arena = vd_malloc(z->arena ? z->arena : 1, e);
    b.pend = vd_malloc((z->pending_max ? z->pending_max : 1) * sizeof *b.pend, e);
    b.anchors = b.anchors_cap ? vd_malloc(b.anchors_cap * sizeof *b.anchors, e) : NULL;
    if (!d->nodes || !d->kids || !d->arena || !b.pend || (b.anchors_cap && !b.anchors)) {
        vd_free(b.pend);
        vd_free(b.anchors);
        return VD_ENOMEM;
    }
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        vd_free(b.pend);
        vd_free(b.anchors);
        return vd_errf(e, VD_ENOMEM, "out of memory starting the YAML parser");
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = VD_OK, docs = 0, root2_line = 0, root2_col = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) { rc = parser_error(&p, text, len, file, e); break; }
        yaml_event_type_t t = ev.type;
        bool stop = t == YAML_STREAM_END_EVENT;
        if (t == YAML_DOCUMENT_START_EVENT) {
            docs++;
            for (size_t i = 0; i < b.anchors_cap; i++) b.anchors[i].node = UINT32_MAX; /* per document */
        } else if (t == YAML_DOCUMENT_END_EVENT && docs == 2) {
            /* the second document has parsed: it is the error, at its root */
            rc = vd_errf(e, VD_ESPEC, "%s:%d:%d: the spec must be a single YAML document (found a second one)",
                         file, root2_line, root2_col);
        } else if (t == YAML_SCALAR_EVENT || t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT ||
                   t == YAML_ALIAS_EVENT) {
            uint32_t id = 0;
            rc = add_node(&b, &ev, &id, file, e);
            if (!rc && b.depth > 0) {
                if (b.pend_n >= z->pending_max) rc = vd_errf(e, VD_EINTERNAL, "%s: the YAML tree outgrew its count", file);
                else b.pend[b.pend_n++] = id;
            } else if (!rc && docs == 2) {
                root2_line = (int)ev.start_mark.line + 1;
                root2_col = (int)ev.start_mark.column + 1;
            }
            if (!rc && t != YAML_SCALAR_EVENT && t != YAML_ALIAS_EVENT) {
                b.open[b.depth].node = id;
                b.open[b.depth].pend_start = b.pend_n;
                b.depth++; /* at most VD_SPEC_MAX_NEST: the first pass saw to it */
            }
        } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
            b.depth--;
            yd_node *n = &d->nodes[b.open[b.depth].node];
            uint64_t start = b.open[b.depth].pend_start, cnt = b.pend_n - start;
            if (d->n_kids + cnt > z->kids) {
                rc = vd_errf(e, VD_EINTERNAL, "%s: the YAML tree outgrew its count", file);
            } else {
                memcpy(d->kids + d->n_kids, b.pend + start, cnt * sizeof *b.pend);
                n->a = d->n_kids;
                n->n = (uint32_t)(n->type == YD_SEQ ? cnt : cnt / 2);
                d->n_kids += (uint32_t)cnt;
                b.pend_n = start;
            }
        }
        yaml_event_delete(&ev);
        if (rc || stop) break;
    }
    yaml_parser_delete(&p);
    vd_free(b.pend);
    vd_free(b.anchors);
    return rc;
}

/* ======================================================================
 * Entry points
 * ====================================================================== */

int yd_load(yd_doc *d, const char *text, size_t len, const char *file, vd_err *e) {
    sizes z;
    int rc = measure(text, len, file, &z, e);
    if (rc) return rc;
    if (z.nodes >= UINT32_MAX || z.kids >= UINT32_MAX || z.arena >= UINT32_MAX)
        return vd_errf(e, VD_ESPEC, "%s:1:1: the spec holds too many YAML values", file);
    rc = build(d, &z, text, len, file, e);
    if (rc == VD_ENOMEM && e && !e->msg[0]) vd_errf(e, VD_ENOMEM, "out of memory parsing %s", file);
    return rc;
}

void yd_free(yd_doc *d) {
    vd_free(d->nodes);
    vd_free(d->kids);
    vd_free(d->arena);
    memset(d, 0, sizeof *d);
}
