/* vdt_optim.c — see vdt_optim.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "vdt.h"
#include "vdt_optim.h"
#include "util/json.h"

/* A number of the file (json integer or real). */
static double num(const json_t *v, const char *what) {
    ck_assert_msg(json_is_number(v), "adamw_reference.json: %s is not a number", what);
    return json_number_value(v);
}

/* A float32 value of the file: the generator writes only such (f32()). */
static float f32(const json_t *v, const char *what) {
    double d = num(v, what);
    float f = (float)d;
    ck_assert_msg((double)f == d, "adamw_reference.json: %s = %.17g is not a float32 value", what,
                  d);
    return f;
}

/* An array of n numbers into out (float32 values when f, else doubles in d). */
static void numbers(const json_t *a, int n, float *f, double *d, const char *what) {
    ck_assert_msg(json_is_array(a) && json_array_size(a) == (size_t)n,
                  "adamw_reference.json: %s is not an array of %d numbers", what, n);
    for (int i = 0; i < n; i++) {
        if (f) f[i] = f32(json_array_get(a, (size_t)i), what);
        else d[i] = num(json_array_get(a, (size_t)i), what);
    }
}

/* steps arrays of n numbers each. */
static void rows(const json_t *a, int steps, int n, float *f, double *d, const char *what) {
    ck_assert_msg(json_is_array(a) && json_array_size(a) == (size_t)steps,
                  "adamw_reference.json: %s has not %d rows", what, steps);
    for (int s = 0; s < steps; s++)
        numbers(json_array_get(a, (size_t)s), n, f ? f + (size_t)s * n : NULL,
                d ? d + (size_t)s * n : NULL, what);
}

static void load_case(const json_t *cj, int steps, vdt_optim_case *c) {
    const char *name = json_string_value(json_object_get(cj, "name"));
    const char *opt = json_string_value(json_object_get(cj, "optimizer"));
    ck_assert_msg(name && opt, "adamw_reference.json: a case without name or optimizer");
    snprintf(c->name, sizeof c->name, "%s", name);
    c->steps = steps;
    memset(&c->o, 0, sizeof c->o);
    c->o.weight_decay = f32(json_object_get(cj, "weight_decay"), "weight_decay");
    numbers(json_object_get(cj, "lr"), steps, c->lr, NULL, "lr");
    if (!strcmp(opt, "adamw")) {
        float b[2];
        c->o.kind = VD_OPT_ADAMW;
        numbers(json_object_get(cj, "betas"), 2, b, NULL, "betas");
        c->o.beta1 = b[0];
        c->o.beta2 = b[1];
        c->o.eps = f32(json_object_get(cj, "eps"), "eps");
    } else {
        ck_assert_msg(!strcmp(opt, "sgd"), "adamw_reference.json: optimizer '%s'", opt);
        c->o.kind = VD_OPT_SGD;
        c->o.momentum = f32(json_object_get(cj, "momentum"), "momentum");
        ck_assert(json_is_boolean(json_object_get(cj, "nesterov")));
        c->o.nesterov = json_is_true(json_object_get(cj, "nesterov"));
    }
    const json_t *ts = json_object_get(cj, "tensors");
    ck_assert_msg(json_is_array(ts) && json_array_size(ts) >= 1 &&
                  json_array_size(ts) <= VDT_OPTIM_MAX_TENSORS,
                  "adamw_reference.json: case '%s' has no tensors (or too many)", name);
    c->n_tensors = (int)json_array_size(ts);
    for (int k = 0; k < c->n_tensors; k++) {
        const json_t *tj = json_array_get(ts, (size_t)k);
        vdt_optim_tensor *t = &c->t[k];
        const json_t *init = json_object_get(tj, "init");
        ck_assert(json_is_array(init) && json_array_size(init) >= 1);
        t->n = (int)json_array_size(init);
        t->init = malloc((size_t)t->n * sizeof *t->init);
        t->grads = malloc((size_t)steps * (size_t)t->n * sizeof *t->grads);
        t->params = malloc((size_t)steps * (size_t)t->n * sizeof *t->params);
        ck_assert(t->init && t->grads && t->params);
        numbers(init, t->n, t->init, NULL, "init");
        rows(json_object_get(tj, "grads"), steps, t->n, t->grads, NULL, "grads");
        rows(json_object_get(tj, "params"), steps, t->n, NULL, t->params, "params");
    }
}

void vdt_optim_ref_load(vdt_optim_ref *r) {
    memset(r, 0, sizeof *r);
    const char *src = getenv("VD_SRCDIR");
    ck_assert_msg(src, "VD_SRCDIR not set (run through meson test)");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/train/data/adamw_reference.json", src);
    size_t n;
    char *text = vdt_slurp(path, &n), err[160];
    json_t *root = vd_json_parse(text, n, 0, err, sizeof err);
    vd_free(text);
    ck_assert_msg(root, "%s: bad JSON at %s", path, err);
    const char *fmt = json_string_value(json_object_get(root, "format"));
    ck_assert_msg(fmt && !strcmp(fmt, "vdnn-optim-reference") &&
                  num(json_object_get(root, "version"), "version") == 1,
                  "%s: not a vdnn-optim-reference file of version 1", path);
    const char *gen = json_string_value(json_object_get(root, "generator"));
    snprintf(r->generator, sizeof r->generator, "%s", gen ? gen : "?");
    double steps = num(json_object_get(root, "steps"), "steps");
    ck_assert_msg(steps >= 1 && steps <= VDT_OPTIM_MAX_STEPS && steps == floor(steps),
                  "%s: steps %g", path, steps);
    const json_t *cs = json_object_get(root, "cases");
    ck_assert_msg(json_is_array(cs) && json_array_size(cs) >= 1, "%s: no cases", path);
    r->n_cases = (int)json_array_size(cs);
    r->cases = calloc((size_t)r->n_cases, sizeof *r->cases);
    ck_assert(r->cases);
    for (int c = 0; c < r->n_cases; c++) load_case(json_array_get(cs, (size_t)c), (int)steps,
                                                   &r->cases[c]);
    json_decref(root);
}

void vdt_optim_ref_free(vdt_optim_ref *r) {
    for (int c = 0; c < r->n_cases; c++)
        for (int k = 0; k < r->cases[c].n_tensors; k++) {
            free(r->cases[c].t[k].init);
            free(r->cases[c].t[k].grads);
            free(r->cases[c].t[k].params);
        }
    free(r->cases);
    memset(r, 0, sizeof *r);
}

double vdt_optim_ref_check(const vdt_optim_case *c, vd_backend *be) {
    int64_t n = 0, off[VDT_OPTIM_MAX_TENSORS];
    for (int k = 0; k < c->n_tensors; k++) { off[k] = n; n += c->t[k].n; }
    bool adamw = c->o.kind == VD_OPT_ADAMW;
    vd_err e = {0};
    void *pool;
    float *h;
    uint64_t bytes = 4 * (uint64_t)n * sizeof(float);   /* p, g, m, v */
    ck_assert_msg(be->pool_create(be, bytes, &pool, &e) == 0, "%s", e.msg);
    ck_assert_msg(be->host_alloc(be, bytes, (void **)&h, &e) == 0, "%s", e.msg);
    float *P = pool, *G = P + n, *M = G + n, *V = adamw ? M + n : NULL;
    for (int k = 0; k < c->n_tensors; k++)
        memcpy(h + off[k], c->t[k].init, (size_t)c->t[k].n * sizeof(float));
    memset(h + 2 * n, 0xFF, 2 * (size_t)n * sizeof(float));   /* state poison: not read at t = 1 */
    ck_assert(be->copy_async(be, VD_STREAM_H2D, P, h, bytes, &e) == 0);
    ck_assert(be->synchronize(be, &e) == 0);
    /* every tensor one range of the update's table, at the step's lr */
    vd_update_range ur[VDT_OPTIM_MAX_TENSORS];
    for (int k = 0; k < c->n_tensors; k++) ur[k] = (vd_update_range){off[k], c->t[k].n, 1.0f};
    void *table = NULL;
    ck_assert_msg(be->ranges_create(be, ur, c->n_tensors, &table, &e) == 0, "%s", e.msg);
    double worst = 0, last = 0;
    for (int s = 0; s < c->steps; s++) {
        for (int k = 0; k < c->n_tensors; k++)
            memcpy(h + n + off[k], c->t[k].grads + (size_t)s * c->t[k].n,
                   (size_t)c->t[k].n * sizeof(float));
        ck_assert(be->copy_async(be, VD_STREAM_H2D, G, h + n, (uint64_t)n * 4, &e) == 0);
        ck_assert(be->synchronize(be, &e) == 0);   /* the update runs on the compute stream */
        vd_optim_step o = c->o;
        o.lr = c->lr[s];
        o.t = s + 1;
        vd_step_scalars ss = vd_step_scalars_of(&o, s);
        ck_assert_msg(be->step_set(be, &ss, &e) == 0, "%s: %s", c->name, e.msg);
        ck_assert_msg(be->update(be, &o, P, G, M, V, table, &e) == 0, "%s: %s", c->name, e.msg);
        ck_assert(be->synchronize(be, &e) == 0);   /* the copy back after the update */
        ck_assert(be->copy_async(be, VD_STREAM_D2H, h, P, (uint64_t)n * 4, &e) == 0);
        ck_assert(be->synchronize(be, &e) == 0);
        last = 0;
        for (int k = 0; k < c->n_tensors; k++) {
            const vdt_optim_tensor *t = &c->t[k];
            for (int i = 0; i < t->n; i++) {
                double r = t->params[(size_t)s * t->n + i];
                double before = s ? t->params[(size_t)(s - 1) * t->n + i] : t->init[i];
                /* the premises of the bound (tests/train/test_optim.c) */
                ck_assert_msg(fabs(r) >= 1.5 && fabs(r) < 2.0 &&
                              fabs(r - before) <= VDT_OPTIM_MAX_STEP,
                              "%s: the reference leaves the bound's premises at step %d, "
                              "tensor %d [%d]: %.17g (before %.17g)", c->name, s + 1, k, i, r,
                              before);
                double rel = fabs((double)h[off[k] + i] - r) / fabs(r);
                ck_assert_msg(rel <= VDT_OPTIM_TOL, "%s (%s backend): step %d, tensor %d [%d]: "
                              "%.9g, PyTorch %.17g (relative error %.3g)", c->name, be->name,
                              s + 1, k, i, (double)h[off[k] + i], r, rel);
                if (rel > last) last = rel;
            }
        }
        if (last > worst) worst = last;
    }
    be->ranges_free(be, table);
    be->host_free(be, h);
    be->pool_destroy(be, pool);
    printf("  %s (%s backend): largest relative error %.3g (after step %d: %.3g)\n", c->name,
           be->name, worst, c->steps, last);
    return last;
}
