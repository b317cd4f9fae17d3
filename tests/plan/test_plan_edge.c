/* test_plan_edge.c — edge cases of the planner and vdnn-plan: minimum
 * budgets that are exactly minimal on nets whose unbounded plan drops its
 * offloads, hostile profile JSON (out-of-range sizes and times give VD_EDATA
 * naming the file), a measured profile saved and loaded bit for bit, DAG corner cases (a single layer besides the loss, the
 * net input feeding several layers, concat(a, a), add(a, a)) trained under
 * every policy at its minimum budget, and command-line combinations. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <check.h>
#include "testnets.h"
#include "exec_util.h"
#include "plan_common.h"
#include "util/json.h"
#include "vdt.h"

/* ---- nets ---------------------------------------------------------------- */

/* fc -> loss: the only layer besides the loss. */
static void net_single(vd_net *net, int batch) {
    tn_begin(net, "single", 1, 4, 4, 3, batch);
    int f = tn_fc(net, "fc", -1, 3);
    tn_loss(net, f);
    tn_finish(net);
}

/* The net input feeds three layers; two adds join them. */
static void net_multi_input(vd_net *net, int batch) {
    tn_begin(net, "multi-input", 2, 6, 6, 3, batch);
    int a = tn_conv(net, "a", -1, 2, 3, 1, 1);
    int b = tn_conv(net, "b", -1, 2, 1, 1, 0);
    int c = tn_pool(net, "c", -1, VD_POOL_MAX, 1, 1);
    int s = tn_join(net, "s", VD_OP_ADD, a, b);
    s = tn_join(net, "s2", VD_OP_ADD, s, c);
    int f = tn_fc(net, "fc", s, 3);
    tn_loss(net, f);
    tn_finish(net);
}

/* concat(r, r) and add(cat, cat): the same tensor twice in one layer. */
static void net_self_join(vd_net *net, int batch) {
    tn_begin(net, "self-join", 2, 6, 6, 3, batch);
    int a = tn_conv(net, "a", -1, 3, 3, 1, 1);
    int r = tn_relu(net, "r", a);
    int cc = tn_join(net, "cat", VD_OP_CONCAT, r, r);
    int s = tn_join(net, "add", VD_OP_ADD, cc, cc);
    int f = tn_fc(net, "fc", s, 3);
    tn_loss(net, f);
    tn_finish(net);
}

typedef void (*net_fn)(vd_net *, int);

/* ---- minimum budgets ----------------------------------------------------- */

/* vd_plan_min_budget m is minimal: the plan fits at m, and not at m - 256.
 * (The unbounded plan of "single" under all drops the offload of x, which
 * saves nothing with memory to spare; a tighter budget keeps it and fits
 * 256 bytes lower: the old search stopped at the unbounded plan's need.) */
START_TEST(test_min_budget_exact) {
    static const net_fn nets[] = {net_single, net_multi_input, net_self_join, tn_lenet};
    int n_all_lower = 0;
    for (size_t ni = 0; ni < VD_ARRAY_LEN(nets); ni++) {
        vd_net net;
        nets[ni](&net, 4);
        vd_profile prof;
        vd_err e = {0};
        analytic_profile(&net, 4, &vd_device_cpu, &prof);
        uint64_t m_none = 0;
        for (int pol = 0; pol < VD_POLICY_COUNT; pol++) {
            vd_plan_opts o = plan_opts(4, (vd_policy)pol);
            uint64_t m = 0;
            ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &m, &e) == 0, "%s", e.msg);
            ck_assert_uint_eq(m % 256, 0);
            if (pol == VD_POLICY_NONE) m_none = m;
            if (pol == VD_POLICY_ALL && m < m_none) n_all_lower++;
            vd_plan p;
            o.budget = m;
            int rc = vd_plan_build(&net, &prof, &o, &p, &e);
            ck_assert_msg(rc == 0, "%s policy %s at its minimum %llu: %s", net.name,
                          vd_policy_name(o.policy), (unsigned long long)m, e.msg);
            vd_plan_free(&p);
            o.budget = m - 256;
            rc = vd_plan_build(&net, &prof, &o, &p, &e);
            ck_assert_msg(rc == VD_EBUDGET, "%s policy %s fits at %llu, below its minimum %llu",
                          net.name, vd_policy_name(o.policy), (unsigned long long)o.budget,
                          (unsigned long long)m);
            vd_plan_free(&p);
        }
        vd_profile_free(&prof);
        vd_net_free(&net);
    }
    ck_assert_int_gt(n_all_lower, 0);   /* "single": offloading x saves 256 bytes */
}
END_TEST

/* Auto's smallest budget on a large net (VGG-16 b256 bf16, analytic H200):
 * each probe is a whole search, so over 4 MiB the bisection stops at a
 * mebibyte (auto.c, min_budget_res) and a split's search probes once below
 * the unsplit answer. The answer still fits, a mebibyte below it does not
 * (the bisection's last failing probe lies between), and it is the split
 * floor (chunks), far under the unsplit one (5.63 GiB): a split search
 * skipped wrongly leaves the unsplit answer. */
START_TEST(test_min_budget_large) {
    vd_net net;
    load_shipped_net(&net, "vgg16.yaml", 256);
    net.train.math = VD_MATH_BF16;
    vd_profile prof;
    analytic_profile(&net, 256, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    vd_err e = {0};
    uint64_t m = 0;
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &m, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(m % 256, 0);
    ck_assert_uint_lt(m, 3ull << 30);
    vd_plan p;
    o.budget = m;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "at its minimum %llu: %s",
                  (unsigned long long)m, e.msg);
    ck_assert_uint_le(p.hwm, m);
    vd_plan_free(&p);
    o.budget = m - (1u << 20);
    int rc = vd_plan_build(&net, &prof, &o, &p, &e);
    if (rc == VD_OK || rc == VD_EBUDGET) vd_plan_free(&p);
    ck_assert_msg(rc == VD_EBUDGET, "fits a mebibyte below its minimum %llu", (unsigned long long)m);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* ---- hostile profiles ---------------------------------------------------- */

/* base with the first occurrence of `from` replaced by `to`, written to path. */
static void write_edit(const char *path, const char *base, const char *from, const char *to) {
    const char *at = strstr(base, from);
    ck_assert_msg(at, "'%s' not in the profile", from);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(base, 1, (size_t)(at - base), f);
    fputs(to, f);
    fputs(at + strlen(from), f);
    ck_assert(fclose(f) == 0);
}

START_TEST(test_profile_hostile) {
    vd_net net;
    net_single(&net, 4);
    vd_profile a, b;
    vd_err e = {0};
    ck_assert(vd_profile_analytic(&net, 4, &vd_device_cpu, &a, &e) == 0);
    char path[] = "/tmp/vdnn-hostile-XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    ck_assert(vd_profile_save(path, &a, &e) == 0);
    size_t nbase;
    char *base = vdt_slurp(path, &nbase);
    /* values a lax reader would load (and convert to garbage or overflow
     * later): sizes at or beyond 2^64, times whose sums are infinite, a
     * zero-ish bandwidth; and some that no reader takes */
    static const struct { const char *from, *to, *key; } cases[] = {
        {"\"workspace\": 0,", "\"workspace\": 1e30,", "workspace"},
        {"\"workspace\": 0, \"fwd_workspace\": 0, \"bwd_workspace\": 0",
         "\"workspace\": 18446744073709551615, \"fwd_workspace\": 18446744073709551615, "
         "\"bwd_workspace\": 18446744073709551615", "workspace"},
        {"\"fwd_workspace\": 0", "\"fwd_workspace\": 1e19", "workspace"},
        {"\"workspace\": 0,", "\"workspace\": 0.5,", "whole"},
        {"\"aux_bytes\": 0", "\"aux_bytes\": 1.8446744073709552e19", "aux_bytes"},
        {"\"mem_bytes\": 0", "\"mem_bytes\": 1e300", "mem_bytes"},
        {"\"sgd_s\": ", "\"sgd_s\": 1e308, \"x\": ", "sgd_s"},
        {"\"fwd_s\": ", "\"fwd_s\": 1.7e308, \"x\": ", "fwd_s"},
        {"\"bwd_s\": ", "\"bwd_s\": -1, \"x\": ", "bwd_s"},
        {"\"launch_s\": ", "\"launch_s\": 1e300, \"x\": ", "launch_s"},
        {"\"launch_s\": ", "\"graph_launch_s\": 1e300, \"launch_s\": ", "graph_launch_s"},
        {"\"launch_s\": ", "\"graph_launch_s\": -1e-6, \"launch_s\": ", "graph_launch_s"},
        {"\"d2h_bw\": ", "\"d2h_bw\": 1e-9, \"x\": ", "bandwidth"},
        {"\"both_bw\": ", "\"both_bw\": 1e-9, \"x\": ", "bandwidth"},
        {"\"batch\": 4", "\"batch\": 4.5", "batch"},
        {"\"name\": \"fc\"", "\"name\": \"fc2\"", "fc2"},
        {"\"fwd_algo\": -1", "\"fwd_algo\": 1e99", "fwd_algo"},
    };
    for (size_t k = 0; k < VD_ARRAY_LEN(cases); k++) {
        write_edit(path, base, cases[k].from, cases[k].to);
        memset(&e, 0, sizeof e);
        int rc = vd_profile_load(path, &net, 4, &b, &e);
        ck_assert_msg(rc == VD_EDATA, "case %zu (%s): rc %d", k, cases[k].to, rc);
        ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, cases[k].key),
                      "case %zu: message '%s' names neither the file nor '%s'", k, e.msg, cases[k].key);
        ck_assert_ptr_null(b.layers);   /* nothing half-built left behind */
    }
    /* the largest accepted sizes load exactly and plan without overflow */
    write_edit(path, base, "\"workspace\": 0, \"fwd_workspace\": 0, \"bwd_workspace\": 0",
               "\"workspace\": 281474976710656, \"fwd_workspace\": 281474976710656, "
               "\"bwd_workspace\": 0");
    ck_assert_msg(vd_profile_load(path, &net, 4, &b, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(b.layers[0].algos[0].workspace, (uint64_t)1 << 48);
    ck_assert_uint_eq(vd_profile_algo_ws(&b.layers[0].algos[0], false), (uint64_t)1 << 48);
    ck_assert_uint_eq(vd_profile_algo_ws(&b.layers[0].algos[0], true), 0);
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = 4;
    vd_plan p;
    ck_assert_msg(vd_plan_build(&net, &b, &o, &p, &e) == 0, "%s", e.msg);
    ck_assert_uint_ge(p.hwm, (uint64_t)1 << 48);
    ck_assert(isfinite(p.sim.iter_s));
    vd_plan_free(&p);
    vd_profile_free(&b);
    vd_free(base);
    unlink(path);
    vd_profile_free(&a);
    vd_net_free(&net);
}
END_TEST

/* ---- DAG corner cases trained under every policy ------------------------- */

/* Every policy at its own minimum budget (and none unbounded) trains the
 * same bytes as none: the plan's accumulation of gradients of a tensor read
 * twice by one layer, or of the net input read by several, is the same in
 * every plan (and the executor checks liveness and memory as it walks). */
/* A measured profile (VGG-16, the H200 profile the plan tests use) saved
 * and loaded again is the same profile bit for bit (every time is written
 * with 17 significant digits), saves to the same bytes, and gives the same
 * plan. */
START_TEST(test_profile_save_load_exact) {
    const char *src = getenv("VD_SRCDIR");
    ck_assert_ptr_nonnull(src);
    vd_net net;
    load_shipped_net(&net, "vgg16.yaml", 256);
    char data[1024];
    snprintf(data, sizeof data, "%s/tests/plan/data/vgg16-b256-h200-fp32-api.json", src);
    vd_profile a, b;
    vd_err e = {0};
    ck_assert_msg(vd_profile_load(data, &net, 256, &a, &e) == 0, "%s", e.msg);
    char p1[] = "/tmp/vdnn-prof1-XXXXXX", p2[] = "/tmp/vdnn-prof2-XXXXXX";
    close(mkstemp(p1));
    close(mkstemp(p2));
    ck_assert_msg(vd_profile_save(p1, &a, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_profile_load(p1, &net, 256, &b, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(a.source, b.source);
    ck_assert(memcmp(&a.dev, &b.dev, sizeof a.dev) == 0);
    ck_assert(memcmp(&a.sgd_s, &b.sgd_s, sizeof a.sgd_s) == 0);
    ck_assert_int_eq(a.n_layers, b.n_layers);
    int n_algos = 0;
    for (int i = 0; i < a.n_layers; i++) {
        const vd_profile_layer *la = &a.layers[i], *lb = &b.layers[i];
        ck_assert_str_eq(la->name, lb->name);
        ck_assert_uint_eq(la->aux_bytes, lb->aux_bytes);
        ck_assert_int_eq(la->n_algos, lb->n_algos);
        for (int k = 0; k < la->n_algos; k++, n_algos++) {
            const vd_profile_algo *x = &la->algos[k], *y = &lb->algos[k];
            ck_assert_str_eq(x->label, y->label);
            ck_assert_msg(memcmp(&x->fwd_s, &y->fwd_s, sizeof x->fwd_s) == 0 &&
                          memcmp(&x->bwd_s, &y->bwd_s, sizeof x->bwd_s) == 0,
                          "%s/%s: %.17g %.17g read back as %.17g %.17g", la->name, x->label,
                          x->fwd_s, x->bwd_s, y->fwd_s, y->bwd_s);
            ck_assert_uint_eq(x->workspace, y->workspace);
            ck_assert_uint_eq(vd_profile_algo_ws(x, false), vd_profile_algo_ws(y, false));
            ck_assert_uint_eq(vd_profile_algo_ws(x, true), vd_profile_algo_ws(y, true));
            ck_assert(x->fwd_algo == y->fwd_algo && x->bwd_data_algo == y->bwd_data_algo &&
                      x->bwd_filter_algo == y->bwd_filter_algo);
        }
    }
    ck_assert_int_gt(n_algos, a.n_layers);   /* the conv layers have several options */
    ck_assert_msg(vd_profile_save(p2, &b, &e) == 0, "%s", e.msg);
    vdt_assert_same_file(p1, p2);
    vd_plan_opts o = plan_opts(256, VD_POLICY_DYN);
    o.budget = (uint64_t)12 << 30;
    vd_plan pa, pb;
    ck_assert_msg(vd_plan_build(&net, &a, &o, &pa, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_plan_build(&net, &b, &o, &pb, &e) == 0, "%s", e.msg);
    ck_assert(pa.feasible && pb.feasible);
    ck_assert_msg(pa.sim.iter_s == pb.sim.iter_s, "%.17g vs %.17g", pa.sim.iter_s, pb.sim.iter_s);
    ck_assert_uint_eq(pa.live_peak, pb.live_peak);
    ck_assert_uint_eq(pa.offload_bytes, pb.offload_bytes);
    vd_plan_free(&pa);
    vd_plan_free(&pb);
    /* vd_profile_parse, the in-memory body of vd_profile_load (fuzz_profile
     * calls it): the same profile from the file's bytes (no NUL after
     * them), messages naming the given name */
    size_t n;
    char *text = vdt_slurp(data, &n);
    char *exact = malloc(n);
    ck_assert_ptr_nonnull(exact);
    memcpy(exact, text, n);
    vd_profile_free(&b);
    ck_assert_msg(vd_profile_parse(exact, n, "mem.json", &net, 256, &b, &e) == 0, "%s", e.msg);
    ck_assert(memcmp(&a.dev, &b.dev, sizeof a.dev) == 0 && a.sgd_s == b.sgd_s);
    ck_assert_int_eq(a.n_layers, b.n_layers);
    ck_assert(memcmp(a.layers, b.layers, sizeof *a.layers * (size_t)a.n_layers) == 0);
    vd_profile_free(&b);
    ck_assert_int_eq(vd_profile_parse(exact, n / 2, "mem.json", &net, 256, &b, &e), VD_EDATA);
    ck_assert_msg(strncmp(e.msg, "mem.json: not valid JSON", 24) == 0, "%s", e.msg);
    ck_assert_ptr_null(b.layers);
    ck_assert_int_eq(vd_profile_parse(exact, n, "mem.json", &net, 128, &b, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "mem.json: profile was made at batch 256"), "%s", e.msg);
    free(exact);
    vd_free(text);
    vd_profile_free(&a);
    vd_profile_free(&b);
    vd_net_free(&net);
    unlink(p1);
    unlink(p2);
}
END_TEST

START_TEST(test_dag_corners_train) {
    static const net_fn nets[] = {net_single, net_multi_input, net_self_join};
    const int batch = 4;
    for (size_t ni = 0; ni < VD_ARRAY_LEN(nets); ni++) {
        vd_net net;
        nets[ni](&net, batch);
        /* minimum budgets under the profile run_training uses */
        vd_err e = {0};
        vd_profile prof;
        vd_backend *be = cpu_for_dev(&net, batch, &slow_link, &prof);
        uint64_t mins[VD_POLICY_COUNT];
        for (int pol = 0; pol < VD_POLICY_COUNT; pol++) {
            vd_plan_opts o = plan_opts(batch, (vd_policy)pol);
            o.fixed_algo = 0;   /* same algorithms everywhere: byte identity */
            ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &mins[pol], &e) == 0, "%s", e.msg);
        }
        vd_profile_free(&prof);
        be->destroy(be);

        run_cfg c = {.policy = VD_POLICY_NONE, .iters = 3, .poison = true, .fixed_algo = 0,
                     .dev = &slow_link};
        run_out ref;
        run_training(&net, batch, &c, &ref);
        ck_assert_msg(ref.rc == 0, "%s none: %s", net.name, ref.msg);
        for (int it = 0; it < 3; it++) ck_assert(isfinite(ref.loss[it]));
        for (int pol = 0; pol < VD_POLICY_COUNT; pol++) {
            c.policy = (vd_policy)pol;
            c.budget = mins[pol];
            run_out o;
            run_training(&net, batch, &c, &o);
            ck_assert_msg(o.rc == 0, "%s %s at %llu: %s", net.name, vd_policy_name(c.policy),
                          (unsigned long long)c.budget, o.msg);
            ck_assert_uint_le(o.st.pool_hwm, c.budget);
            for (int it = 0; it < 3; it++) ck_assert(isfinite(o.loss[it]));
            /* byte identity: same algorithms, same accumulation order (dyn
             * searches the algorithms itself, fixed_algo or not; auto's
             * smallest budget may split layers, whose chunks sum the
             * parameter gradients in another order: test_chunks) */
            if (pol != VD_POLICY_DYN && !o.split)
                ck_assert_msg(memcmp(o.params, ref.params, (size_t)net.param_floats * 4) == 0,
                              "%s: policy %s trains different bytes", net.name,
                              vd_policy_name(c.policy));
            run_free(&o);
        }
        run_free(&ref);
        vd_net_free(&net);
    }
}
END_TEST

/* ---- command line -------------------------------------------------------- */

START_TEST(test_cli_combinations) {
    const char *src = getenv("VD_SRCDIR"), *bld = getenv("VD_BUILDDIR");
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(bld);
    char spec[] = "/tmp/vdnn-edge-XXXXXX", trace[] = "/tmp/vdnn-edge-trace-XXXXXX";
    char cmd[4096];
    static char out[1 << 16];
    int fd = mkstemp(spec);
    ck_assert(fd >= 0);
    /* a net name that needs escaping in JSON */
    static const char yaml[] =
        "name: \"q\\\"uote\\\\d\"\n"
        "input: { channels: 1, height: 4, width: 4, classes: 3 }\n"
        "train: { batch: 4 }\n"
        "layers:\n"
        "  - { name: fc, type: fc, out: 3 }\n"
        "  - { name: loss, type: softmax_cross_entropy }\n";
    ck_assert(write(fd, yaml, sizeof yaml - 1) == (ssize_t)(sizeof yaml - 1));
    close(fd);
    fd = mkstemp(trace);
    close(fd);
    unlink(trace);
    /* --min-budget --format json is valid JSON with the name escaped */
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --device cpu --min-budget --format json", bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    char jerr[256];
    json_t *root = vd_json_parse(out, strlen(out), 0, jerr, sizeof jerr);
    ck_assert_msg(root, "%s: %s", jerr, out);
    const char *nm = json_string_value(json_object_get(root, "net"));
    ck_assert(nm);
    ck_assert_str_eq(nm, "q\"uote\\d");
    uint64_t all = 0, none = 0;
    ck_assert(vd_json_u64(json_object_get(json_object_get(root, "min_budgets"), "all"), &all));
    ck_assert(vd_json_u64(json_object_get(json_object_get(root, "min_budgets"), "none"), &none));
    ck_assert_uint_lt(all, none);
    json_decref(root);
    /* combinations whose second half would otherwise be ignored silently: usage */
    static const char *const bad[] = {
        "--min-budget --budget 1G", "--min-budget --trace %s", "--summary --trace %s",
        "--summary --min-budget", "--summary --save-profile %s",
    };
    for (size_t k = 0; k < VD_ARRAY_LEN(bad); k++) {
        char opts[256];
        snprintf(opts, sizeof opts, bad[k], trace);
        snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --device cpu %s 2>&1", bld, spec, opts);
        ck_assert_msg(run_cmd(cmd, out, sizeof out) == VD_EUSAGE, "%s: %s", opts, out);
        ck_assert_msg(access(trace, F_OK) != 0, "%s wrote %s", opts, trace);
    }
    /* a long option without its value is named */
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --batch 2>&1", bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EUSAGE);
    ck_assert_msg(strstr(out, "'--batch' needs a value"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --summary=1 2>&1", bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EUSAGE);
    ck_assert_msg(strstr(out, "'--summary=1' takes no value"), "%s", out);
    /* --summary --format json still works; --trace to an unwritable path is io */
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --summary --format json", bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    root = vd_json_parse(out, strlen(out), 0, jerr, sizeof jerr);
    ck_assert_msg(root, "%s", jerr);
    json_decref(root);
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --device cpu --trace /nonexistent/dir/t.json "
             "2>&1 >/dev/null", bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EIO);
    /* a full stdout is an io error, also for --min-budget (buffered output) */
    if (access("/dev/full", W_OK) == 0) {
        snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --device cpu --min-budget >/dev/full 2>&1", bld, spec);
        ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EIO);
        snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --device cpu >/dev/full 2>&1", bld, spec);
        ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EIO);
    }
    /* DAG nets: plan JSON and trace are valid JSON (auto, tight budget) */
    char net[1024];
    snprintf(net, sizeof net, "%s/nets/tiny-inception.yaml", src);
    if (access(net, R_OK) == 0) {
        snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --policy auto --budget 420K --format json "
                 "--trace %s", bld, net, trace);
        ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
        root = vd_json_parse(out, strlen(out), 0, jerr, sizeof jerr);
        ck_assert_msg(root, "%s", jerr);
        json_decref(root);
        size_t nt;
        char *t = vdt_slurp(trace, &nt);
        root = vd_json_parse(t, strlen(t), 0, jerr, sizeof jerr);
        ck_assert_msg(root, "trace: %s", jerr);
        json_decref(root);
        vd_free(t);
        unlink(trace);
    }
    unlink(spec);
}
END_TEST

/* Each test in a TCase of its own (vdt_case), so that CK_RUN_CASE=NAME runs one. */
static TCase *case_of(Suite *s, const TTest *t) {
    TCase *tc = vdt_case(s, t, 300);
    return tc;
}

static Suite *suite(void) {
    Suite *s = suite_create("plan-edge");
    tcase_add_test(case_of(s, test_min_budget_exact), test_min_budget_exact);
    tcase_add_test(case_of(s, test_min_budget_large), test_min_budget_large);
    tcase_add_test(case_of(s, test_profile_hostile), test_profile_hostile);
    tcase_add_test(case_of(s, test_profile_save_load_exact), test_profile_save_load_exact);
    tcase_add_test(case_of(s, test_dag_corners_train), test_dag_corners_train);
    tcase_add_test(case_of(s, test_cli_combinations), test_cli_combinations);
    return s;
}

int main(void) { return vdt_run(suite()); }
