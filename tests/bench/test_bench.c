/* test_bench.c — vdnn-bench as a program, on the CPU backend and LeNet:
 * usage errors, the sweep's budgets (checked against vd_plan_min_budget
 * computed here), feasibility flags, the numbers in the JSON (against plans
 * built here and closed-form relations), the CSV (exact header, rows, empty
 * fields for infeasible points) and the SVG (well-formed XML checked by a
 * small independent parser, one polyline per policy with one vertex per
 * feasible point). */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "vd_config.h"
#include "util/util.h"
#include "net/net.h"
#include "spec/spec.h"
#include "backend/backend.h"
#include "plan/plan.h"
#include "util/json.h"
#include "vdt.h"

enum { BATCH = 8 };
static char g_bin[1024], g_net[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_bin, sizeof g_bin, "%s/vdnn-bench", b);
    snprintf(g_net, sizeof g_net, "%s/nets/lenet.yaml", s);
}

/* Run "vdnn-bench ARGS" (printf-style); exit status; output (stdout then
 * stderr) in *out (malloc'd) if out. */
static int run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(char **out, const char *fmt, ...) {
    char a[3000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a, sizeof a, fmt, ap);
    va_end(ap);
    return vdt_run_bin(g_bin, a, false, out);
}

static void expect(int code, const char *want, const char *args) {
    char *out;
    int rc = run(&out, "%s", args);
    ck_assert_msg(rc == code, "vdnn-bench %s: exit %d, expected %d; output:\n%s", args, rc, code, out);
    if (want) ck_assert_msg(strstr(out, want), "vdnn-bench %s: no '%s' in:\n%s", args, want, out);
    vd_free(out);
}

/* ---- the reference: LeNet at BATCH on the CPU backend, built here ---------- */

typedef struct ref {
    vd_net net;
    vd_backend *be;
    vd_profile prof;
} ref;

/* In math m (the plans' feature-map bytes follow it). */
static void ref_open_math(ref *r, vd_math m) {
    vd_err e;
    vd_net_init(&r->net);
    ck_assert_msg(vd_spec_load(g_net, &r->net, &e) == 0, "%s", e.msg);
    r->net.train.batch = BATCH;
    r->net.train.math = m;
    ck_assert_msg(vd_net_finalize(&r->net, &e) == 0, "%s", e.msg);
    vd_schedule_inplace(&r->net);
    ck_assert_msg(vd_backend_cpu_create(&r->be, &e) == 0, "%s", e.msg);
    ck_assert_msg(r->be->layer_setup(r->be, &r->net, BATCH, m, false, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_profile_backend(&r->net, BATCH, r->be, &vd_device_cpu, &r->prof, &e) == 0,
                  "%s", e.msg);
}

static void ref_open(ref *r) { ref_open_math(r, VD_MATH_FP32); }

static void ref_close(ref *r) {
    vd_profile_free(&r->prof);
    r->be->destroy(r->be);
    vd_net_free(&r->net);
}

static uint64_t ref_min(ref *r, vd_policy p) {
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = BATCH;
    o.policy = p;
    uint64_t m = 0;
    vd_err e;
    ck_assert_msg(vd_plan_min_budget(&r->net, &r->prof, &o, &m, &e) == 0, "%s", e.msg);
    return m;
}

/* A feasible plan at budget (caller frees). */
static void ref_plan(ref *r, vd_policy p, uint64_t budget, vd_plan *plan) {
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = BATCH;
    o.policy = p;
    o.budget = budget;
    vd_err e;
    ck_assert_msg(vd_plan_build(&r->net, &r->prof, &o, plan, &e) == 0, "%s", e.msg);
}

/* ---- readers ---------------------------------------------------------------- */

static json_t *read_json(const char *path) {
    char *t, err[200];
    size_t n;
    vd_err e;
    ck_assert_msg(vd_read_file(path, &t, &n, &e) == 0, "%s", e.msg);
    json_t *v = vd_json_parse(t, n, 0, err, sizeof err);
    ck_assert_msg(v, "%s: %s", path, err);
    vd_free(t);
    ck_assert(json_is_object(v));
    return v;
}

static double num(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    ck_assert_msg(json_is_number(v), "'%s' missing or not a number", k);
    return json_number_value(v);
}

static uint64_t u64(const json_t *o, const char *k) {
    uint64_t x;
    ck_assert_msg(vd_json_u64(json_object_get(o, k), &x), "'%s' missing or not an unsigned integer",
                  k);
    return x;
}

static const char *str(const json_t *o, const char *k) {
    const char *v = json_string_value(json_object_get(o, k));
    ck_assert_msg(v, "'%s' missing or not a string", k);
    return v;
}

static bool is_null(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    ck_assert_msg(v != NULL, "'%s' missing", k);
    return json_is_null(v);
}

static bool boolean(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    ck_assert_msg(json_is_boolean(v), "'%s' missing or not a boolean", k);
    return json_is_true(v);
}

static bool feasible(const json_t *p) { return boolean(p, "feasible"); }

/* The documented CSV columns (man vdnn-bench(1)), in order. */
static const char *const CSV_COLS[] = {
    "budget_bytes", "budget_gib", "policy", "feasible", "offload_policy", "iter_s", "iter_min_s",
    "images_s", "pool_hwm", "live_peak", "device_used", "offload_gb", "prefetch_gb",
    "copy_gbps", "predicted_s", "error_pct", "bound_s", "note" };
enum { NCOL = (int)VD_ARRAY_LEN(CSV_COLS), MAXROWS = 64 };

typedef struct csv {
    int n_rows;                             /* data rows (header excluded) */
    char *cell[MAXROWS][NCOL];              /* malloc'd */
} csv;

/* RFC 4180 reader: quoted fields may hold commas and doubled quotes. Checks
 * the header against CSV_COLS and that every row has NCOL fields. */
static void read_csv(const char *path, csv *c) {
    char *t;
    size_t n;
    vd_err e;
    ck_assert_msg(vd_read_file(path, &t, &n, &e) == 0, "%s", e.msg);
    memset(c, 0, sizeof *c);
    const char *p = t;
    int row = -1;
    while (*p) {
        char *fields[NCOL + 4];
        int nf = 0;
        for (;;) {
            char buf[2048];
            size_t k = 0;
            if (*p == '"') {
                p++;
                while (*p && !(*p == '"' && p[1] != '"')) {
                    if (*p == '"') p++;
                    if (k + 1 < sizeof buf) buf[k++] = *p;
                    p++;
                }
                ck_assert_msg(*p == '"', "%s: unterminated quoted field", path);
                p++;
            } else {
                while (*p && *p != ',' && *p != '\n') {
                    if (k + 1 < sizeof buf) buf[k++] = *p;
                    p++;
                }
            }
            buf[k] = 0;
            ck_assert_msg(nf < NCOL + 4, "%s: too many fields", path);
            fields[nf++] = strdup(buf);
            if (*p == ',') { p++; continue; }
            ck_assert_msg(*p == '\n', "%s: a line does not end with a newline", path);
            p++;
            break;
        }
        ck_assert_msg(nf == NCOL, "%s: line %d has %d fields, expected %d", path, row + 2, nf, NCOL);
        if (row < 0) {
            for (int i = 0; i < NCOL; i++) {
                ck_assert_str_eq(fields[i], CSV_COLS[i]);
                free(fields[i]);
            }
        } else {
            ck_assert_int_lt(row, MAXROWS);
            for (int i = 0; i < NCOL; i++) c->cell[row][i] = fields[i];
        }
        row++;
    }
    c->n_rows = row;
    vd_free(t);
}

static void csv_free(csv *c) {
    for (int r = 0; r < c->n_rows; r++)
        for (int i = 0; i < NCOL; i++) free(c->cell[r][i]);
}

static int col(const char *name) {
    for (int i = 0; i < NCOL; i++)
        if (!strcmp(CSV_COLS[i], name)) return i;
    ck_abort_msg("no column %s", name);
    return -1;
}

/* ---- a small XML well-formedness checker (independent of the writer) ------ */

static bool name_char(char ch, bool first) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == ':' ||
           (!first && ((ch >= '0' && ch <= '9') || ch == '-' || ch == '.'));
}

/* Character data / attribute value up to stop: no '<', entities valid. */
static const char *xml_chars(const char *p, char stop, const char **err) {
    while (*p && *p != stop) {
        if (*p == '<' && stop != '<') { *err = "'<' in an attribute value"; return NULL; }
        if (*p == '&') {
            const char *q = p + 1;
            if (*q == '#') {
                q++;
                if (!(*q >= '0' && *q <= '9')) { *err = "bad character reference"; return NULL; }
                while (*q >= '0' && *q <= '9') q++;
            } else {
                static const char *const ents[] = { "amp", "lt", "gt", "quot", "apos" };
                size_t k = 0;
                while (q[k] && q[k] != ';' && k < 8) k++;
                bool ok = false;
                for (size_t i = 0; i < VD_ARRAY_LEN(ents); i++)
                    ok |= strlen(ents[i]) == k && strncmp(q, ents[i], k) == 0;
                if (!ok) { *err = "unknown entity"; return NULL; }
                q += k;
            }
            if (*q != ';') { *err = "entity without ';'"; return NULL; }
            p = q;
        }
        p++;
    }
    return p;
}

/* Returns NULL if well-formed (one root element, balanced tags, quoted
 * unique attributes, valid entities), else what is wrong. Counts elements
 * named count_name in *count. */
static const char *xml_check(const char *p, const char *count_name, int *count) {
    const char *err = NULL;
    char stack[64][64];
    int depth = 0, roots = 0;
    *count = 0;
    while (*p == ' ' || *p == '\n') p++;
    if (strncmp(p, "<?xml", 5) == 0) {
        p = strstr(p, "?>");
        if (!p) return "unterminated XML declaration";
        p += 2;
    }
    for (;;) {
        if (!(p = xml_chars(p, '<', &err))) return err;
        if (!*p) break;
        p++;                                        /* '<' */
        if (*p == '/') {
            p++;
            char nm[64];
            size_t k = 0;
            while (name_char(*p, k == 0) && k < 63) nm[k++] = *p++;
            nm[k] = 0;
            while (*p == ' ') p++;
            if (*p != '>') return "bad closing tag";
            p++;
            if (depth == 0 || strcmp(stack[depth - 1], nm) != 0) return "mismatched closing tag";
            depth--;
            continue;
        }
        if (depth == 0 && ++roots > 1) return "more than one root element";
        char nm[64];
        size_t k = 0;
        while (name_char(*p, k == 0) && k < 63) nm[k++] = *p++;
        nm[k] = 0;
        if (k == 0) return "element without a name";
        if (!strcmp(nm, count_name)) (*count)++;
        char attrs[32][64];
        int na = 0;
        for (;;) {
            bool ws = false;
            while (*p == ' ' || *p == '\n' || *p == '\t') { p++; ws = true; }
            if (*p == '/' && p[1] == '>') { p += 2; break; }
            if (*p == '>') {
                p++;
                if (depth == 64) return "too deep";
                snprintf(stack[depth++], 64, "%s", nm);
                break;
            }
            if (!ws) return "attributes not separated by white space";
            char an[64];
            size_t j = 0;
            while (name_char(*p, j == 0) && j < 63) an[j++] = *p++;
            an[j] = 0;
            if (j == 0) return "bad attribute name";
            for (int i = 0; i < na; i++)
                if (!strcmp(attrs[i], an)) return "duplicate attribute";
            if (na < 32) snprintf(attrs[na++], 64, "%s", an);
            if (*p++ != '=') return "attribute without '='";
            char q = *p++;
            if (q != '"' && q != '\'') return "unquoted attribute value";
            if (!(p = xml_chars(p, q, &err))) return err;
            if (*p != q) return "unterminated attribute value";
            p++;
        }
    }
    if (depth != 0) return "unclosed element";
    if (roots != 1) return "no root element";
    return NULL;
}

START_TEST(xml_checker_catches_errors) {
    /* the checker must be able to fail */
    int n;
    ck_assert_ptr_null(xml_check("<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><x/></g>t &amp; u</svg>\n", "x", &n));
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_nonnull(xml_check("<svg><g></svg></g>", "x", &n));
    ck_assert_ptr_nonnull(xml_check("<svg a=1/>", "x", &n));
    ck_assert_ptr_nonnull(xml_check("<svg a=\"1\" a=\"2\"/>", "x", &n));
    ck_assert_ptr_nonnull(xml_check("<svg>a & b</svg>", "x", &n));
    ck_assert_ptr_nonnull(xml_check("<svg/><svg/>", "x", &n));
    ck_assert_ptr_nonnull(xml_check("<svg>", "x", &n));
    ck_assert_ptr_nonnull(xml_check("<svg a=\"<\"/>", "x", &n));
}
END_TEST

/* ---- tests ------------------------------------------------------------------- */

START_TEST(usage_errors_exit_2) {
    setup();
    char a[1200];
    expect(2, "missing NET.yaml", "");
    snprintf(a, sizeof a, "'%s' --policies none,bogus", g_net);
    expect(2, "--policies", a);
    snprintf(a, sizeof a, "'%s' --policies none,none", g_net);
    expect(2, "twice", a);
    snprintf(a, sizeof a, "'%s' --policies none,,all", g_net);
    expect(2, "--policies", a);
    snprintf(a, sizeof a, "'%s' --budgets 12Q --backend cpu", g_net);
    expect(2, "--budgets", a);
    snprintf(a, sizeof a, "'%s' --budgets 1M,,2M --backend cpu", g_net);
    expect(2, "--budgets", a);
    snprintf(a, sizeof a, "'%s' --steps 0", g_net);
    expect(2, "--steps", a);
    snprintf(a, sizeof a, "'%s' --iters 0", g_net);
    expect(2, "--iters", a);
    snprintf(a, sizeof a, "'%s' --rounds 0", g_net);
    expect(2, "--rounds", a);
    snprintf(a, sizeof a, "'%s' --rounds 17", g_net);
    expect(2, "--rounds", a);
    snprintf(a, sizeof a, "'%s' --polices none", g_net);
    expect(2, "did you mean '--policies'", a);
    snprintf(a, sizeof a, "'%s' --backend cudaa", g_net);
    expect(2, "did you mean 'cuda'", a);
    snprintf(a, sizeof a, "'%s' --profile x.json --analytic-profile", g_net);
    expect(2, "exclude", a);
    expect(4, NULL, "/nonexistent/net.yaml --backend cpu");
    if (!vd_backend_cuda_available()) {
        snprintf(a, sizeof a, "'%s' --backend cuda", g_net);
        expect(VD_HAVE_CUDA ? VD_EDEVICE : VD_EUNSUPPORTED, NULL, a);
    }
    char *out;
    ck_assert_int_eq(run(&out, "--version"), 0);
    ck_assert_msg(strstr(out, "vdnn-bench " VD_VERSION), "%s", out);
    vd_free(out);
}
END_TEST

START_TEST(help_lists_every_flag) {
    setup();
    char *out;
    ck_assert_int_eq(run(&out, "--help"), 0);
    static const char *const flags[] = {
        "--batch", "--budgets", "--steps", "--policies", "--prefetch", "--warmup", "--iters",
        "--rounds", "--seed", "--backend", "--device", "--math", "--deterministic", "--profile",
        "--analytic-profile", "--profile-out", "--csv", "--json", "--plot", "--quiet",
        "--help", "--version" };
    for (size_t i = 0; i < VD_ARRAY_LEN(flags); i++)
        ck_assert_msg(strstr(out, flags[i]), "--help does not mention %s", flags[i]);
    /* every policy the planner knows is offered */
    for (int p = 0; p < VD_POLICY_COUNT; p++)
        ck_assert_msg(strstr(out, vd_policy_name((vd_policy)p)), "--help lacks policy %s",
                      vd_policy_name((vd_policy)p));
    vd_free(out);
}
END_TEST

/* budgets min,peak x policies none,all: the 2 x 2 sweep CI runs. */
START_TEST(sweep_min_peak) {
    setup();
    ref r;
    ref_open(&r);
    uint64_t min_none = ref_min(&r, VD_POLICY_NONE), min_all = ref_min(&r, VD_POLICY_ALL);
    /* the premise of the feasibility checks below: offloading saves memory */
    ck_assert_msg(min_all < min_none, "all %llu, none %llu", (unsigned long long)min_all,
                  (unsigned long long)min_none);
    char *d = vdt_tmpdir("vdnn-bench-test"), *out;
    int rc = run(&out, "'%s' --backend cpu --batch %d --budgets peak,min --policies none,all "
                 "--warmup 1 --iters 2 --csv %s/b.csv --json %s/b.json --plot %s/b.svg",
                 g_net, BATCH, d, d, d);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    /* the table on stdout, progress on stderr */
    ck_assert_msg(strstr(out, "[4/4]") && strstr(out, "s/iter") && strstr(out, "does not fit"),
                  "%s", out);
    vd_free(out);

    /* JSON */
    char path[1200];
    snprintf(path, sizeof path, "%s/b.json", d);
    json_t *j = read_json(path);
    ck_assert_str_eq(str(j, "net"), "lenet");
    ck_assert_uint_eq(u64(j, "batch"), BATCH);
    ck_assert_str_eq(str(j, "backend"), "cpu");
    ck_assert_str_eq(str(j, "math"), "fp32");
    /* 'peak': what none needs at its fastest, the pool of its plan under no
     * budget to speak of, and at least its smallest budget (LeNet: equal) */
    {
        vd_plan up;
        ref_plan(&r, VD_POLICY_NONE, (uint64_t)1 << 50, &up);
        uint64_t fast = VD_ALIGN_UP(up.hwm, (uint64_t)256);
        ck_assert_uint_eq(u64(j, "none_peak"), fast > min_none ? fast : min_none);
        vd_plan_free(&up);
    }
    const json_t *mb = json_object_get(j, "min_budgets");
    ck_assert_ptr_nonnull(mb);
    ck_assert_uint_eq(u64(mb, "none"), min_none);
    ck_assert_uint_eq(u64(mb, "all"), min_all);
    const json_t *pts = json_object_get(j, "points");
    ck_assert_msg(json_is_array(pts) && json_array_size(pts) == 4, "points: %zu",
                  json_array_size(pts));
    /* budget-major, ascending; policies in the order given */
    const uint64_t want_b[4] = { min_all, min_all, min_none, min_none };
    const char *const want_p[4] = { "none", "all", "none", "all" };
    const bool want_f[4] = { false, true, true, true };
    for (int i = 0; i < 4; i++) {
        const json_t *p = json_array_get(pts, (size_t)i);
        ck_assert_uint_eq(u64(p, "budget_bytes"), want_b[i]);
        ck_assert_str_eq(str(p, "policy"), want_p[i]);
        ck_assert_msg(feasible(p) == want_f[i], "point %d: feasible %d", i, feasible(p));
        if (!want_f[i]) {
            static const char *const nulls[] = { "iter_s", "images_s", "pool_hwm", "device_used",
                                                 "offload_gb", "copy_gbps", "predicted_s",
                                                 "error_pct" };
            for (size_t k = 0; k < VD_ARRAY_LEN(nulls); k++)
                ck_assert_msg(is_null(p, nulls[k]), "infeasible point: %s not null", nulls[k]);
            ck_assert_msg(strlen(str(p, "note")) > 0, "infeasible point without a note");
            continue;
        }
        vd_policy pol = !strcmp(want_p[i], "all") ? VD_POLICY_ALL : VD_POLICY_NONE;
        vd_plan plan;
        ref_plan(&r, pol, want_b[i], &plan);
        double it = num(p, "iter_s"), ims = num(p, "images_s");
        ck_assert_msg(it > 0 && num(p, "iter_min_s") > 0 && num(p, "iter_min_s") <= it,
                      "iter_s %g, iter_min_s %g", it, num(p, "iter_min_s"));
        /* the file holds the doubles exactly (17 significant digits); images_s =
         * batch / iter_s, so the product is the batch up to a rounding or two */
        ck_assert_msg(fabs(ims * it - BATCH) <= 1e-12 * BATCH, "images_s %g x iter_s %g", ims, it);
        ck_assert_uint_le(u64(p, "pool_hwm"), want_b[i]);
        ck_assert_uint_eq(u64(p, "pool_hwm"), plan.hwm);      /* simulator == executor */
        ck_assert_uint_eq(u64(p, "live_peak"), plan.live_peak);
        ck_assert_msg(is_null(p, "device_used") && is_null(p, "device_within"),
                      "device_used on the cpu backend");
        ck_assert_uint_eq(u64(p, "offload_bytes"), plan.offload_bytes);
        ck_assert_uint_eq(u64(p, "prefetch_bytes"), plan.prefetch_bytes);
        if (pol == VD_POLICY_NONE) ck_assert_uint_eq(plan.offload_bytes, 0);
        else ck_assert_uint_gt(plan.offload_bytes, 0);
        ck_assert_msg(num(p, "offload_gb") == plan.offload_bytes / 1e9, "offload_gb %.17g",
                      num(p, "offload_gb"));      /* the same division, read back exactly */
        double cg = (plan.offload_bytes + plan.prefetch_bytes) / 1e9 / it;
        /* the bench may divide in another order: a few roundings apart */
        ck_assert_msg(fabs(num(p, "copy_gbps") - cg) <= 1e-12 * (cg + 1e-12), "copy_gbps %g vs %g",
                      num(p, "copy_gbps"), cg);
        double pred = num(p, "predicted_s");
        ck_assert_msg(pred == plan.sim.iter_s, "predicted %.17g vs %.17g", pred,
                      plan.sim.iter_s);               /* the same plan, read back exactly */
        /* error_pct: the same formula, up to a rounding or two of the bench's order */
        double ep = 100.0 * (it - pred) / pred;
        ck_assert_msg(fabs(num(p, "error_pct") - ep) <= 1e-12 * (fabs(ep) + 1), "error_pct %g vs %g",
                      num(p, "error_pct"), ep);
        ck_assert_str_eq(str(p, "offload_policy"), vd_policy_name(plan.offload_policy));
        vd_plan_free(&plan);
    }
    json_decref(j);

    /* CSV: the same 4 points */
    csv c;
    snprintf(path, sizeof path, "%s/b.csv", d);
    read_csv(path, &c);
    ck_assert_int_eq(c.n_rows, 4);
    for (int i = 0; i < 4; i++) {
        char bb[32];
        snprintf(bb, sizeof bb, "%llu", (unsigned long long)want_b[i]);
        ck_assert_str_eq(c.cell[i][col("budget_bytes")], bb);
        ck_assert_str_eq(c.cell[i][col("policy")], want_p[i]);
        ck_assert_str_eq(c.cell[i][col("feasible")], want_f[i] ? "yes" : "no");
        ck_assert_msg((strlen(c.cell[i][col("iter_s")]) > 0) == want_f[i], "row %d iter_s '%s'", i,
                      c.cell[i][col("iter_s")]);
        ck_assert_str_eq(c.cell[i][col("device_used")], "");
        if (!want_f[i]) ck_assert_msg(strlen(c.cell[i][col("note")]) > 0, "no note");
    }
    csv_free(&c);

    /* SVG: well-formed, one polyline per policy with one vertex per feasible point */
    char *svg;
    size_t n;
    vd_err e;
    snprintf(path, sizeof path, "%s/b.svg", d);
    ck_assert_msg(vd_read_file(path, &svg, &n, &e) == 0, "%s", e.msg);
    int npl = 0;
    const char *why = xml_check(svg, "polyline", &npl);
    ck_assert_msg(why == NULL, "%s is not well-formed XML: %s", path, why);
    ck_assert_int_eq(npl, 2);
    ck_assert_msg(strstr(svg, "<svg") && strstr(svg, ">none</text>") && strstr(svg, ">all</text>"),
                  "no legend");
    const char *pl_none = strstr(svg, "data-policy=\"none\""), *pl_all = strstr(svg, "data-policy=\"all\"");
    ck_assert_ptr_nonnull(pl_none);
    ck_assert_ptr_nonnull(pl_all);
    struct { const char *at; int want; } pl[2] = { { pl_none, 1 }, { pl_all, 2 } };
    for (int k = 0; k < 2; k++) {
        const char *pts_attr = strstr(pl[k].at, "points=\"");
        ck_assert_ptr_nonnull(pts_attr);
        pts_attr += 8;
        int commas = 0;
        for (const char *q = pts_attr; *q != '"'; q++) commas += *q == ',';
        ck_assert_msg(commas == pl[k].want, "polyline %d has %d vertices, expected %d", k, commas,
                      pl[k].want);
    }
    vd_free(svg);
    vdt_rmrf(d);
    vd_free(d);
    ref_close(&r);
}
END_TEST

/* A budget nothing fits in: rows with feasible = no, exit 0, and no
 * smallest budget searched; the default sweep spans min .. none's peak in
 * --steps distinct budgets. */
START_TEST(infeasible_and_default_sweep) {
    setup();
    ref r;
    ref_open(&r);
    uint64_t min_none = ref_min(&r, VD_POLICY_NONE), min_all = ref_min(&r, VD_POLICY_ALL);
    char *d = vdt_tmpdir("vdnn-bench-test"), *out, path[1200];
    int rc = run(&out, "'%s' --backend cpu --batch %d --budgets 4K --policies all,none --warmup 0 "
                 "--iters 1 --json %s/i.json --csv %s/i.csv --quiet", g_net, BATCH, d, d);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "vdnn-bench: [") == NULL, "--quiet printed progress:\n%s", out);
    vd_free(out);
    snprintf(path, sizeof path, "%s/i.json", d);
    json_t *j = read_json(path);
    const json_t *pts = json_object_get(j, "points");
    ck_assert_uint_eq(json_array_size(pts), 2);
    for (size_t i = 0; i < 2; i++) {
        ck_assert_uint_eq(u64(json_array_get(pts, i), "budget_bytes"), 4096);
        ck_assert(!feasible(json_array_get(pts, i)));
    }
    /* budgets given without 'min': no policy's smallest budget searched */
    ck_assert_uint_eq(json_object_size(json_object_get(j, "min_budgets")), 0);
    json_decref(j);
    csv c;
    snprintf(path, sizeof path, "%s/i.csv", d);
    read_csv(path, &c);
    ck_assert_int_eq(c.n_rows, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_str_eq(c.cell[i][col("feasible")], "no");
        ck_assert_str_eq(c.cell[i][col("images_s")], "");
    }
    csv_free(&c);

    rc = run(&out, "'%s' --backend cpu --batch %d --steps 3 --policies all,none --warmup 0 "
             "--iters 1 --json %s/s.json --plot %s/s.svg", g_net, BATCH, d, d);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    vd_free(out);
    snprintf(path, sizeof path, "%s/s.json", d);
    j = read_json(path);
    pts = json_object_get(j, "points");
    ck_assert_uint_eq(json_array_size(pts), 6);
    uint64_t b0 = u64(json_array_get(pts, 0), "budget_bytes"),
             b1 = u64(json_array_get(pts, 2), "budget_bytes"),
             b2 = u64(json_array_get(pts, 4), "budget_bytes");
    ck_assert_uint_eq(b0, min_all);
    ck_assert_uint_eq(b2, min_none);
    ck_assert_msg(b0 < b1 && b1 < b2, "budgets %llu %llu %llu", (unsigned long long)b0,
                  (unsigned long long)b1, (unsigned long long)b2);
    for (int i = 0; i < 6; i++) {
        const json_t *p = json_array_get(pts, (size_t)i);
        bool none = !strcmp(str(p, "policy"), "none");
        /* all fits everywhere from its minimum; none only at its peak */
        ck_assert_msg(feasible(p) == (!none || u64(p, "budget_bytes") >= min_none), "point %d", i);
    }
    json_decref(j);
    char *svg;
    size_t n;
    vd_err e;
    snprintf(path, sizeof path, "%s/s.svg", d);
    ck_assert_msg(vd_read_file(path, &svg, &n, &e) == 0, "%s", e.msg);
    int npl = 0;
    const char *why = xml_check(svg, "polyline", &npl);
    ck_assert_msg(why == NULL, "not well-formed: %s", why);
    ck_assert_int_eq(npl, 2);
    vd_free(svg);
    vdt_rmrf(d);
    vd_free(d);
    ref_close(&r);
}
END_TEST

/* A point whose training fails (the spec's lr makes the loss NaN) is a row
 * with failed = true; the others still run, every output is written, and
 * the exit status is the first error's (10). */
START_TEST(failed_points_are_rows) {
    setup();
    char *spec, *out, path[1200], *d = vdt_tmpdir("vdnn-bench-test");
    size_t n;
    vd_err e;
    ck_assert_int_eq(vd_read_file(g_net, &spec, &n, &e), 0);
    char *lr = strstr(spec, "\n  lr: 0.01\n");
    ck_assert_ptr_nonnull(lr);
    memcpy(lr, "\n  lr: 1e30\n", 12);               /* same length: "0.01" -> "1e30" */
    snprintf(path, sizeof path, "%s/nan.yaml", d);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(spec, 1, n, f), n);
    fclose(f);
    vd_free(spec);
    int rc = run(&out, "'%s' --backend cpu --batch %d --budgets 4K,peak --policies none --warmup 2 "
                 "--iters 2 --json %s/f.json --csv %s/f.csv", path, BATCH, d, d);
    ck_assert_msg(rc == VD_ENUMERIC, "exit %d, expected %d:\n%s", rc, VD_ENUMERIC, out);
    ck_assert_msg(strstr(out, "1 point failed") && strstr(out, "NaN"), "%s", out);
    vd_free(out);
    snprintf(path, sizeof path, "%s/f.json", d);
    json_t *j = read_json(path);
    const json_t *pts = json_object_get(j, "points");
    ck_assert_uint_eq(json_array_size(pts), 2);
    const json_t *p0 = json_array_get(pts, 0), *p1 = json_array_get(pts, 1);
    ck_assert(!feasible(p0));                       /* 4K: does not fit, not a failure */
    ck_assert(!boolean(p0, "failed"));
    ck_assert(feasible(p1));                        /* peak: fits, but training failed */
    ck_assert(boolean(p1, "failed"));
    ck_assert(is_null(p1, "iter_s") && is_null(p1, "images_s"));
    ck_assert_msg(strstr(str(p1, "note"), "NaN"), "%s", str(p1, "note"));
    json_decref(j);
    csv c;
    snprintf(path, sizeof path, "%s/f.csv", d);
    read_csv(path, &c);
    ck_assert_int_eq(c.n_rows, 2);
    ck_assert_str_eq(c.cell[1][col("feasible")], "yes");
    ck_assert_str_eq(c.cell[1][col("iter_s")], "");
    csv_free(&c);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* bf16 math, from --math bf16 or from the spec's train.math (--math fp32
 * over it): the JSON names the run's math (it once said fp32 for bf16), and
 * the sweep's budgets are the minimums of bf16 plans (2-byte feature maps),
 * below fp32's; the points at them fit and train. */
START_TEST(bf16_math) {
    setup();
    ref r32, r16;
    ref_open_math(&r32, VD_MATH_FP32);
    ref_open_math(&r16, VD_MATH_BF16);
    uint64_t none16 = ref_min(&r16, VD_POLICY_NONE), all16 = ref_min(&r16, VD_POLICY_ALL);
    ck_assert_uint_lt(none16, ref_min(&r32, VD_POLICY_NONE));
    ck_assert_uint_lt(all16, ref_min(&r32, VD_POLICY_ALL));
    char *d = vdt_tmpdir("vdnn-bench-test"), *out, path[1200], spec16[1200];
    /* the shipped spec with "math: bf16" in its train: section */
    char *text;
    size_t n;
    vd_err e;
    ck_assert_int_eq(vd_read_file(g_net, &text, &n, &e), 0);
    char *tr = strstr(text, "\ntrain:\n");
    ck_assert_ptr_nonnull(tr);
    snprintf(spec16, sizeof spec16, "%s/lenet16.yaml", d);
    FILE *f = fopen(spec16, "wb");
    ck_assert_ptr_nonnull(f);
    size_t head = (size_t)(tr - text) + 8;
    ck_assert(fwrite(text, 1, head, f) == head && fputs("  math: bf16\n", f) >= 0 &&
              fwrite(text + head, 1, n - head, f) == n - head && fclose(f) == 0);
    vd_free(text);
    struct { const char *spec, *flag, *math; } runs[] = {
        {g_net, "--math bf16", "bf16"}, {spec16, "", "bf16"}, {spec16, "--math fp32", "fp32"}};
    for (size_t k = 0; k < VD_ARRAY_LEN(runs); k++) {
        int rc = run(&out, "'%s' %s --backend cpu --batch %d --budgets min --policies none,all "
                     "--warmup 0 --iters 1 --json %s/m.json --quiet", runs[k].spec, runs[k].flag,
                     BATCH, d);
        ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
        ck_assert_msg(strstr(out, runs[k].math), "%s", out);
        vd_free(out);
        snprintf(path, sizeof path, "%s/m.json", d);
        json_t *j = read_json(path);
        ck_assert_str_eq(str(j, "math"), runs[k].math);
        const json_t *mb = json_object_get(j, "min_budgets");
        ref *r = !strcmp(runs[k].math, "bf16") ? &r16 : &r32;
        ck_assert_uint_eq(u64(mb, "none"), ref_min(r, VD_POLICY_NONE));
        ck_assert_uint_eq(u64(mb, "all"), ref_min(r, VD_POLICY_ALL));
        const json_t *p = json_array_get(json_object_get(j, "points"), 1);   /* all at its min */
        ck_assert_str_eq(str(p, "policy"), "all");
        ck_assert_msg(feasible(p) && num(p, "iter_s") > 0, "all at its minimum");
        json_decref(j);
    }
    vdt_rmrf(d);
    vd_free(d);
    ref_close(&r32);
    ref_close(&r16);
}
END_TEST

/* --rounds 3: every feasible point runs once per round, the rounds in turn
 * (no point's second run before every point's first), an infeasible point
 * only in the first; the JSON's round_s holds each round's mean and iter_s
 * their mean. */
START_TEST(rounds_alternate) {
    setup();
    char *d = vdt_tmpdir("vdnn-bench-test"), *out, path[1200];
    int rc = run(&out, "'%s' --backend cpu --batch %d --budgets peak,min --policies none,all "
                 "--warmup 0 --iters 2 --rounds 3 --json %s/r.json", g_net, BATCH, d);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "in each of 3 rounds"), "%s", out);
    const char *last_first = strstr(out, "[4/4, round 1/3]");
    const char *first_second = strstr(out, "[2/4, round 2/3]");
    ck_assert_msg(last_first && first_second && last_first < first_second, "%s", out);
    ck_assert_msg(strstr(out, "[4/4, round 3/3]") && !strstr(out, "[1/4, round 2/3]"), "%s", out);
    vd_free(out);
    snprintf(path, sizeof path, "%s/r.json", d);
    json_t *j = read_json(path);
    ck_assert_uint_eq(u64(j, "rounds"), 3);
    const json_t *pts = json_object_get(j, "points");
    ck_assert_uint_eq(json_array_size(pts), 4);
    for (size_t i = 0; i < 4; i++) {
        const json_t *p = json_array_get(pts, i);
        if (!feasible(p)) {
            ck_assert_msg(i == 0 && is_null(p, "round_s"), "point %zu", i);
            continue;
        }
        const json_t *rs = json_object_get(p, "round_s");
        ck_assert_msg(json_is_array(rs) && json_array_size(rs) == 3, "point %zu: round_s", i);
        double mean = 0, lo = INFINITY;
        for (size_t k = 0; k < 3; k++) {
            double v = json_real_value(json_array_get(rs, k));
            ck_assert_msg(v > 0, "point %zu round %zu: %g", i, k, v);
            mean += v / 3;
            if (v < lo) lo = v;
        }
        /* the rounds' mean, its divisions in another order: equal up to a few roundings */
        ck_assert_msg(fabs(num(p, "iter_s") - mean) <= 1e-12 * mean, "point %zu: iter_s %.17g, "
                      "mean of the rounds %.17g", i, num(p, "iter_s"), mean);
        /* the fastest iteration is no slower than the fastest round's mean */
        ck_assert_msg(num(p, "iter_min_s") <= lo, "point %zu: iter_min_s %g > %g", i,
                      num(p, "iter_min_s"), lo);
    }
    json_decref(j);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* A captured iteration (--graph on; the CPU backend emulates the capture)
 * is timed only where it replays: with no warm-up asked, the warm-up goes
 * on until a step replays its graph, so every timed iteration of every
 * round replays (replayed = iters x rounds; with the old warm-up the first
 * timed steps ran eagerly or captured); --graph off replays none. */
START_TEST(captured_iterations_timed_replaying) {
    setup();
    char *d = vdt_tmpdir("vdnn-bench-test"), *out, path[1200];
    static const struct { const char *graph; uint64_t replayed; } runs[] = {{"on", 6}, {"off", 0}};
    for (size_t k = 0; k < 2; k++) {
        int rc = run(&out, "'%s' --backend cpu --batch %d --budgets peak --policies none "
                     "--graph %s --warmup 0 --iters 3 --rounds 2 --json %s/g.json --quiet", g_net,
                     BATCH, runs[k].graph, d);
        ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
        vd_free(out);
        snprintf(path, sizeof path, "%s/g.json", d);
        json_t *j = read_json(path);
        const json_t *p = json_array_get(json_object_get(j, "points"), 0);
        ck_assert_msg(p && feasible(p), "--graph %s", runs[k].graph);
        ck_assert_msg(u64(p, "replayed") == runs[k].replayed, "--graph %s: replayed %llu",
                      runs[k].graph, (unsigned long long)u64(p, "replayed"));
        json_decref(j);
    }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

VDT_MAIN("bench", 300,
          xml_checker_catches_errors, usage_errors_exit_2, help_lists_every_flag, sweep_min_peak,
          infeasible_and_default_sweep, failed_points_are_rows, bf16_math,
          rounds_alternate, captured_iterations_timed_replaying)
