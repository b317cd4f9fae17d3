/* names.c — the spec parser's names table and its pending unknown input.
 *
 * Layer names and template-use names map to layer indices in an open
 * addressing table (FNV-1a, at most half full). An input name that is not
 * in the table yet is held as the pending error: it is reported, as
 * "defined later" or as "unknown" with a suggestion, once the whole list
 * has been read, or in place of any error found after it. */
#include <stdio.h>
#include <string.h>
#include "spec/spec_internal.h"

static uint64_t fnv(const char *k) {
    uint64_t h = 1469598103934665603ull;
    for (; *k; k++) h = (h ^ (unsigned char)*k) * 1099511628211ull;
    return h;
}

name_ent *vds_names_find(const sp *s, const char *k) {
    if (!s->names_cap) return NULL;
    size_t mask = s->names_cap - 1;
    for (size_t i = fnv(k) & mask;; i = (i + 1) & mask) {
        if (!s->names[i].name) return NULL;
        if (strcmp(s->names[i].name, k) == 0) return &s->names[i];
    }
}

int vds_names_put(sp *s, const char *k, int idx, int line, int col) {
    if ((s->names_n + 1) * 2 > s->names_cap) {
        size_t nc = s->names_cap ? s->names_cap * 2 : 256;
        name_ent *nv = vd_calloc(nc, sizeof *nv, s->e);
        if (!nv) return vds_nomem(s);
        for (size_t i = 0; i < s->names_cap; i++) {
            if (!s->names[i].name) continue;
            size_t j = fnv(s->names[i].name) & (nc - 1);
            while (nv[j].name) j = (j + 1) & (nc - 1);
            nv[j] = s->names[i];
        }
        vd_free(s->names);
        s->names = nv;
        s->names_cap = nc;
    }
    size_t mask = s->names_cap - 1, i = fnv(k) & mask;
    while (s->names[i].name) i = (i + 1) & mask;
    s->names[i].name = vd_strdup(k, s->e);
    if (!s->names[i].name) return vds_nomem(s);
    s->names[i].idx = idx;
    s->names[i].line = line;
    s->names[i].col = col;
    s->names_n++;
    return VD_OK;
}

/* Array of all known names (for suggestions); names relative to `prefix.`
 * are offered without the prefix. Caller frees the array only. */
static const char **names_list(sp *s, const char *prefix, int *n) {
    const char **v = vd_malloc((s->names_n + 1) * sizeof *v, s->e);
    *n = 0;
    if (!v) return NULL;
    size_t pl = strlen(prefix);
    for (size_t i = 0; i < s->names_cap; i++) {
        const char *nm = s->names[i].name;
        if (!nm) continue;
        if (pl && strncmp(nm, prefix, pl) == 0 && nm[pl] == '.') nm += pl + 1;
        v[(*n)++] = nm;
    }
    return v;
}

bool vds_is_input_name(const char *n) { return !strcmp(n, "input") || !strcmp(n, "data"); }

/* Resolve an input name typed inside an expansion with `prefix` (may be ""):
 * the net input, else prefix.name, else name. Returns the entry or NULL. */
const name_ent *vds_resolve(const sp *s, const char *prefix, const char *name, int *idx) {
    static const name_ent net_input = {NULL, -1, 0, 0};
    if (vds_is_input_name(name)) { *idx = -1; return &net_input; }
    if (prefix[0]) {
        /* a full name that does not fit VD_NAME_MAX names no layer (get_name
         * rejects those), so it is not looked up */
        char full[VD_NAME_MAX];
        int k = snprintf(full, sizeof full, "%s.%s", prefix, name);
        const name_ent *ne = k >= 0 && (size_t)k < sizeof full ? vds_names_find(s, full) : NULL;
        if (ne) { *idx = ne->idx; return ne; }
    }
    const name_ent *ne = vds_names_find(s, name);
    if (ne) *idx = ne->idx;
    return ne;
}

int vds_report_pending(sp *s) {
    s->pending = false;
    int idx;
    char msg[1024];
    const name_ent *later = vds_resolve(s, s->pend_prefix, s->pend_name, &idx);
    if (later) {
        snprintf(msg, sizeof msg,
                 "input '%.200s' is defined later (line %d); a layer may only take inputs from "
                 "layers listed above it", s->pend_name, later->line);
    } else {
        int n = 0;
        const char **c = names_list(s, s->pend_prefix, &n);
        if (!c) return vds_nomem(s);
        static const char *const extra[] = {"input"};
        const char *sug = vd_suggest(s->pend_name, c, n);
        if (!sug) sug = vd_suggest(s->pend_name, extra, 1);
        if (sug)
            snprintf(msg, sizeof msg, "unknown input '%.200s' (did you mean '%s'?)", s->pend_name, sug);
        else
            snprintf(msg, sizeof msg, "unknown input '%.200s'", s->pend_name);
        vd_free(c);
    }
    return vds_fail_msg(s, s->pend_line, s->pend_col, msg, s->pend_ctx);
}

void vds_clear_pending(sp *s) {
    VD_FREE(s->pend_name);
    VD_FREE(s->pend_prefix);
}
