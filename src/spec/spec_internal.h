/* spec_internal.h — what the spec parser's files share. Not API.
 *
 * The parser's state (sp), the variables of ${expressions} (scope), the
 * templates, and the functions each file offers the others:
 *   spec.c           errors, the layer list (expansion of layers and
 *                    entries), the top-level sections, the entry points;
 *   names.c          the names table and the pending unknown input;
 *   expr.c           the ${} expression language and substitution;
 *   readers.c        typed value readers over the ydoc tree;
 *   train_section.c  the train: section and its defaults;
 *   data_section.c   the data: section;
 *   templates.c      the templates: section and template uses.
 * Every reader and section reports through vds_err_at: VD_ESPEC with a
 * "FILE:LINE:COL: message" (first error wins), or VD_ENOMEM (vds_nomem). */
#ifndef VD_SPEC_INTERNAL_H
#define VD_SPEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "spec/spec.h"
#include "spec/ydoc.h"

#define MAX_VALUE 4096        /* bytes of one scalar after substitution */
#define MAX_PARAMS 64         /* parameters of one template */

typedef struct var {
    const char *name;         /* not owned (document text or literal) */
    char *val;                /* owned */
} var;

/* Variables visible to ${...}. Lexical: a template body sees its params,
 * `name`, `input` and the repeat indices of its own entries, not the
 * variables of the entry that used it. */
typedef struct scope {
    const struct scope *parent;
    var *v;
    int n;
} scope;

typedef struct tmpl {
    const char *name;
    yd_node *layers;          /* sequence */
    int n_params;
    const char *pname[MAX_PARAMS];
    const char *pdef[MAX_PARAMS]; /* default text, NULL = required */
} tmpl;

typedef struct frame {        /* one active template use, for messages */
    const char *tmpl;
    const char *use;          /* the use's full name (vds_expand_use's, alive while the frame is) */
    int line, col;
} frame;

typedef struct name_ent {
    char *name;               /* owned; NULL = empty slot */
    int idx;                  /* layer index (-1 = net input) */
    int line, col;            /* where it was defined */
} name_ent;

/* The parser's state: one per vd_spec_parse call. */
typedef struct sp {
    const char *file;
    const char *text;
    size_t len;
    yd_doc doc;
    vd_net *net;
    vd_err *e;
    bool failed;
    /* names: layers and template-use aliases -> layer index */
    name_ent *names;
    size_t names_cap, names_n;
    tmpl *tmpls;
    int n_tmpls;
    frame frames[VD_SPEC_MAX_DEPTH];
    int depth;
    char **ctx;               /* [n_layers] expansion context suffix or NULL */
    int ctx_cap;
    long work;
    /* first unknown input, reported once we know whether it is defined later */
    bool pending;
    char *pend_name;          /* owned */
    char *pend_prefix;        /* owned */
    char pend_ctx[768];       /* for the message only */
    int pend_line, pend_col;
} sp;

/* A position in the spec (1-based). */
typedef struct mark {
    int line, col;
} mark;

static inline mark mk(const yd_node *n) { return (mark){(int)n->line, (int)n->col}; }
static inline int ln(mark m) { return m.line; }
static inline int cl(mark m) { return m.col; }
/* The text of scalar node n of the spec being parsed (s in scope). */
#define TXT(n) yd_text(&s->doc, (n))
/* Item i of sequence n; key and value of pair i of mapping n. */
#define ITEM(n, i) yd_item(&s->doc, (n), (uint32_t)(i))
#define KEY(n, i) yd_key(&s->doc, (n), (uint32_t)(i))
#define VAL(n, i) yd_val(&s->doc, (n), (uint32_t)(i))

/* The keys of a template use, in the order of the value array that
 * vds_map_keys fills for them. */
enum { U_USE, U_NAME, U_WITH, U_INPUTS, U_REPEAT, U_INDEX, U_IF, U_NKEYS };

/* ---- errors (spec.c) ------------------------------------------------- */

/* Fail with "FILE:line:col: msg" + ctx (the template context suffix).
 * Returns VD_ESPEC. */
int vds_fail_msg(sp *s, int line, int col, const char *msg, const char *ctx);
/* Report an error at mark m (first error wins; a pending unknown input that
 * came earlier in the file is reported instead). Returns VD_ESPEC. */
__attribute__((format(printf, 3, 4)))
int vds_err_at(sp *s, mark m, const char *fmt, ...);
/* Mark s failed for want of memory (e already filled). Returns VD_ENOMEM. */
int vds_nomem(sp *s);

/* ---- names table and the pending unknown input (names.c) -------------- */

/* The entry of full name k, or NULL. */
name_ent *vds_names_find(const sp *s, const char *k);
/* Add name k (copied) for layer idx (-1 = net input), defined at line:col.
 * Returns VD_OK or VD_ENOMEM. */
int vds_names_put(sp *s, const char *k, int idx, int line, int col);
/* "input" and "data" name the net input. */
bool vds_is_input_name(const char *n);
/* Resolve an input name typed inside an expansion with `prefix` (may be ""):
 * the net input, else prefix.name, else name. Returns the entry or NULL. */
const name_ent *vds_resolve(const sp *s, const char *prefix, const char *name, int *idx);
/* Report the pending unknown input: "defined later" or "unknown input"
 * with a suggestion. Clears s->pending. Returns VD_ESPEC or VD_ENOMEM. */
int vds_report_pending(sp *s);
/* Release the pending input's strings. */
void vds_clear_pending(sp *s);

/* ---- expressions (expr.c) ------------------------------------------- */

/* t is a word: a letter or _, then letters, digits and _. */
bool vds_is_ident(const char *t);
/* Strict decimal integer with optional sign. */
bool vds_parse_int(const char *t, int64_t *out);
/* true/True/TRUE/1 or false/False/FALSE/0. */
bool vds_parse_bool_text(const char *t, bool *out);
/* The innermost variable name[0..len) visible from sc, or NULL. */
const var *vds_scope_get(const scope *sc, const char *name, size_t len);
/* Evaluate expression text `src` (NUL-terminated). A lone variable name
 * yields that variable's text; anything else is an integer expression.
 * Errors at m. *out: vd_malloc'd. */
int vds_eval(sp *s, const scope *sc, mark m, const char *src, char **out);
/* Replace every ${expr} in `in` (at most MAX_VALUE bytes result).
 * Errors at m. *out: vd_malloc'd. */
int vds_subst(sp *s, const scope *sc, mark m, const char *in, char **out);

/* ---- value readers (readers.c) ---------------------------------------- */

/* "a list", "a mapping" or "a scalar", for messages. */
const char *vds_node_kind(const yd_node *n);
/* The text of scalar node n (key `what` for messages), ${} substituted.
 * *out: vd_malloc'd. */
int vds_scalar(sp *s, const scope *sc, yd_node *n, const char *what, char **out);
/* n is a plain empty, ~ or null scalar. */
bool vds_is_null_scalar(const sp *s, const yd_node *n);
/* Index of k in keys[0..n), or -1. */
int vds_find_key(const char *const *keys, int n, const char *k);
/* Check the keys of mapping m (`what` names it in messages): each is one of
 * allowed[0..n) and appears once; vals[i] = value node of allowed[i] or NULL.
 * A key found in `elsewhere` (NULL-terminated, may be NULL) gets "does not
 * apply to <elsewhere_what>" instead of "unknown key". */
int vds_map_keys(sp *s, yd_node *m, const char *what, const char *const *allowed, int n,
                 const char *const *elsewhere, const char *elsewhere_what, yd_node **vals);
/* Integer value of key `key` in [lo, hi]. */
int vds_get_i64(sp *s, const scope *sc, yd_node *n, const char *key, int64_t lo, int64_t hi,
                int64_t *out);
/* Integer value in [lo, INT32_MAX]. */
int vds_get_int(sp *s, const scope *sc, yd_node *n, const char *key, int lo, int *out);
/* int or [h, w], each at least lo. */
int vds_get_pair(sp *s, const scope *sc, yd_node *n, const char *key, int lo, int *h, int *w);
/* Float in a range given by lo/hi and open/closed ends; `range` describes it. */
int vds_get_float(sp *s, const scope *sc, yd_node *n, const char *key, double lo, bool lo_open,
                  double hi, bool hi_open, const char *range, double *out);
/* true or false. */
int vds_get_bool(sp *s, const scope *sc, yd_node *n, const char *key, bool *out);
/* Evaluate a condition: with ${} the substituted text must be a boolean or
 * integer; without, the text itself is an expression. */
int vds_get_cond(sp *s, const scope *sc, yd_node *n, bool *out);

/* ---- the train: section (train_section.c) ----------------------------- */

/* Read the train: mapping n into s->net->train (over its defaults). */
int vds_parse_train(sp *s, yd_node *n);
/* The training defaults that a spec's train: section overrides. */
void vds_train_defaults(vd_train_cfg *t);

/* ---- the data: section (data_section.c) ------------------------------- */

/* Read the data: mapping n into s->net (after the input: section). */
int vds_parse_data(sp *s, yd_node *n);

/* ---- templates (templates.c) ------------------------------------------ */

/* Read the templates: mapping n into s->tmpls (bodies are expanded later). */
int vds_parse_templates(sp *s, yd_node *n);
/* Expand one use of a template (item with its use keys v[U_NKEYS]) in scope
 * sc under prefix; *prev: in, the layer above; out, the use's last layer. */
int vds_expand_use(sp *s, yd_node *item, yd_node **v, const scope *sc, const char *prefix, int *prev);

/* ---- the layer list (spec.c) ----------------------------------------- */

/* Expand the entries of sequence seq in scope sc under prefix; *prev as in
 * vds_expand_use. */
int vds_expand_list(sp *s, yd_node *seq, const scope *sc, const char *prefix, int *prev);
/* Substitute and check a layer/use name; full = prefix.name. */
int vds_get_name(sp *s, const scope *sc, yd_node *n, const char *prefix, char full[VD_NAME_MAX]);
/* Resolve an 'inputs' value (a name or a list of names) into in[0..*n_in). */
int vds_get_inputs(sp *s, const scope *sc, yd_node *n, const char *prefix, int *n_in,
                   int in[VD_MAX_INPUTS]);

#endif
