/* templates.c — the spec's templates: section and template uses.
 *
 * A template is a list of layer entries with parameters (a list of names,
 * or a mapping of names to defaults). A use (`use: T`, `name:`, `with:`,
 * `inputs:`) binds the parameters in the caller's scope, adds `name` and
 * `input`, and expands the template's entries under the use's name as a
 * prefix; the use's name then stands for the expansion's last layer. Uses
 * nest up to VD_SPEC_MAX_DEPTH deep; a template may not use itself. */
#include <stdio.h>
#include <string.h>
#include "spec/spec_internal.h"

#define MAX_TEMPLATES 1024

int vds_parse_templates(sp *s, yd_node *n) {
    if (n->type != YD_MAP)
        return vds_err_at(s, mk(n), "'templates' must be a mapping of template names to templates");
    int cnt = (int)n->n;
    if (cnt > MAX_TEMPLATES) return vds_err_at(s, mk(n), "too many templates (at most %d)", MAX_TEMPLATES);
    s->tmpls = vd_calloc((size_t)cnt + 1, sizeof *s->tmpls, s->e);
    if (!s->tmpls) return vds_nomem(s);
    static const char *const keys[] = {"params", "layers", "description"};
    for (int i = 0; i < cnt; i++) {
        yd_node *k = KEY(n, i), *v = VAL(n, i), *tv[3];
        if (k->type != YD_SCALAR || strlen(TXT(k)) != k->n ||
            !vds_is_ident(TXT(k)))
            return vds_err_at(s, mk(k), "a template name must be a word (letters, digits, _)");
        const char *name = TXT(k);
        for (int j = 0; j < s->n_tmpls; j++)
            if (!strcmp(s->tmpls[j].name, name)) return vds_err_at(s, mk(k), "duplicate template '%s'", name);
        char what[128];
        snprintf(what, sizeof what, "template '%.64s'", name);
        int rc = vds_map_keys(s, v, what, keys, 3, NULL, NULL, tv);
        if (rc) return rc;
        tmpl *t = &s->tmpls[s->n_tmpls];
        t->name = name;
        if (!tv[1]) return vds_err_at(s, mk(v), "missing key 'layers' in %s", what);
        if (tv[1]->type != YD_SEQ)
            return vds_err_at(s, mk(tv[1]), "'layers' of %s must be a list", what);
        t->layers = tv[1];
        if (tv[2] && tv[2]->type != YD_SCALAR)
            return vds_err_at(s, mk(tv[2]), "'description' must be text");
        yd_node *pn = tv[0];
        if (pn && !vds_is_null_scalar(s, pn)) {
            bool seq = pn->type == YD_SEQ;
            if (!seq && pn->type != YD_MAP)
                return vds_err_at(s, mk(pn),
                                  "'params' must be a list of names or a mapping of names to defaults");
            int np = (int)pn->n;
            if (np > MAX_PARAMS) return vds_err_at(s, mk(pn), "too many params (at most %d)", MAX_PARAMS);
            for (int j = 0; j < np; j++) {
                yd_node *pk = seq ? ITEM(pn, j) : KEY(pn, j);
                yd_node *pv = seq ? NULL : VAL(pn, j);
                if (pk->type != YD_SCALAR || strlen(TXT(pk)) != pk->n ||
                    !vds_is_ident(TXT(pk)))
                    return vds_err_at(s, mk(pk), "a parameter name must be a word (letters, digits, _)");
                const char *pname = TXT(pk);
                if (!strcmp(pname, "name") || !strcmp(pname, "input") || !strcmp(pname, "true") ||
                    !strcmp(pname, "false"))
                    return vds_err_at(s, mk(pk), "'%s' is reserved and cannot be a parameter name", pname);
                for (int q = 0; q < t->n_params; q++)
                    if (!strcmp(t->pname[q], pname))
                        return vds_err_at(s, mk(pk), "duplicate parameter '%s'", pname);
                const char *def = NULL;
                if (pv && !vds_is_null_scalar(s, pv)) {
                    if (pv->type != YD_SCALAR || strlen(TXT(pv)) != pv->n)
                        return vds_err_at(s, mk(pv), "the default of parameter '%s' must be a single value",
                                          pname);
                    def = TXT(pv);
                }
                t->pname[t->n_params] = pname;
                t->pdef[t->n_params] = def;
                t->n_params++;
            }
        }
        s->n_tmpls++;
    }
    return VD_OK;
}

int vds_expand_use(sp *s, yd_node *item, yd_node **v, const scope *sc, const char *prefix, int *prev) {
    int rc;
    char *tn;
    if ((rc = vds_scalar(s, sc, v[U_USE], "use", &tn))) return rc;
    const tmpl *t = NULL;
    for (int i = 0; i < s->n_tmpls; i++)
        if (!strcmp(s->tmpls[i].name, tn)) t = &s->tmpls[i];
    if (!t) {
        const char *names[MAX_TEMPLATES];
        for (int i = 0; i < s->n_tmpls; i++) names[i] = s->tmpls[i].name;
        const char *sug = vd_suggest(tn, names, s->n_tmpls);
        if (sug) rc = vds_err_at(s, mk(v[U_USE]), "unknown template '%.64s' (did you mean '%s'?)", tn, sug);
        else if (!s->n_tmpls) rc = vds_err_at(s, mk(v[U_USE]), "unknown template '%.64s' (the spec has no "
                                              "'templates' section)", tn);
        else rc = vds_err_at(s, mk(v[U_USE]), "unknown template '%.64s'", tn);
        vd_free(tn);
        return rc;
    }
    vd_free(tn);
    for (int d = 0; d < s->depth; d++)
        if (s->frames[d].tmpl == t->name)
            return vds_err_at(s, mk(v[U_USE]), "template '%s' uses itself (recursion is not allowed)", t->name);
    if (s->depth >= VD_SPEC_MAX_DEPTH)
        return vds_err_at(s, mk(item), "templates nested too deeply (more than %d levels)", VD_SPEC_MAX_DEPTH);
    if (!v[U_NAME]) return vds_err_at(s, mk(item), "missing key 'name' in a use of template '%s'", t->name);
    char full[VD_NAME_MAX];
    if ((rc = vds_get_name(s, sc, v[U_NAME], prefix, full))) return rc;
    int block_in = *prev;
    if (v[U_INPUTS]) {
        int n_in, in[VD_MAX_INPUTS];
        if ((rc = vds_get_inputs(s, sc, v[U_INPUTS], prefix, &n_in, in))) return rc;
        if (n_in != 1)
            return vds_err_at(s, mk(v[U_INPUTS]), "a template use takes exactly one input, got %d", n_in);
        block_in = in[0];
    }
    /* bind parameters: with: values are evaluated in the caller's scope */
    var vars[MAX_PARAMS + 2];
    int nv = 0;
    yd_node *with = v[U_WITH];
    if (with && !vds_is_null_scalar(s, with) && with->type != YD_MAP)
        return vds_err_at(s, mk(with), "'with' must be a mapping of parameter names to values");
    if (with && with->type == YD_MAP) {
        for (uint32_t p = 0; p < with->n; p++) {
            yd_node *k = KEY(with, p);
            if (k->type != YD_SCALAR) return vds_err_at(s, mk(k), "parameter names must be words");
            const char *key = TXT(k);
            if (vds_find_key(t->pname, t->n_params, key) < 0) {
                const char *sug = vd_suggest(key, t->pname, t->n_params);
                if (sug) return vds_err_at(s, mk(k), "template '%s' has no parameter '%.64s' (did you mean "
                                           "'%s'?)", t->name, key, sug);
                return vds_err_at(s, mk(k), "template '%s' has no parameter '%.64s'", t->name, key);
            }
            for (uint32_t q = 0; q < p; q++) {
                yd_node *k2 = KEY(with, q);
                if (k2->type == YD_SCALAR && !strcmp(TXT(k2), key))
                    return vds_err_at(s, mk(k), "duplicate key '%s' in 'with'", key);
            }
        }
    }
    for (int i = 0; i < t->n_params && !rc; i++) {
        yd_node *val = NULL;
        if (with && with->type == YD_MAP)
            for (uint32_t p = 0; p < with->n; p++)
                if (!strcmp(TXT(KEY(with, p)), t->pname[i])) val = VAL(with, p);
        char *text = NULL;
        if (val) {
            if (val->type != YD_SCALAR)
                rc = vds_err_at(s, mk(val), "parameter '%s' must be a single value, not %s", t->pname[i],
                                vds_node_kind(val));
            else rc = vds_scalar(s, sc, val, t->pname[i], &text);
        } else if (t->pdef[i]) {
            if (!(text = vd_strdup(t->pdef[i], s->e))) rc = vds_nomem(s);
        } else {
            rc = vds_err_at(s, mk(item), "template '%s' needs parameter '%s' (add it under 'with:')",
                            t->name, t->pname[i]);
        }
        if (!rc) { vars[nv].name = t->pname[i]; vars[nv].val = text; nv++; }
    }
    if (!rc) {
        vars[nv].name = "name";
        if (!(vars[nv].val = vd_strdup(full, s->e))) rc = vds_nomem(s);
        else nv++;
    }
    if (!rc) {
        vars[nv].name = "input";
        if (!(vars[nv].val = vd_strdup(block_in < 0 ? "input" : s->net->layers[block_in].name, s->e)))
            rc = vds_nomem(s);
        else nv++;
    }
    if (!rc) {
        scope inner = {NULL, vars, nv};
        frame *f = &s->frames[s->depth++];
        f->tmpl = t->name;
        f->use = full;
        f->line = ln(mk(item));
        f->col = cl(mk(item));
        int out = block_in;
        rc = vds_expand_list(s, t->layers, &inner, full, &out);
        s->depth--;
        /* the use's name stands for the expansion's last layer */
        if (!rc) rc = vds_names_put(s, full, out, ln(mk(item)), cl(mk(item)));
        if (!rc) *prev = out;
    }
    for (int i = 0; i < nv; i++) vd_free(vars[i].val);
    return rc;
}
