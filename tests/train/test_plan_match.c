/* test_plan_match.c — vdnn-plan prints the plan vdnn-train runs.
 *
 * For LeNet (batch 16) and AlexNet (batch 2) on the CPU backend and every
 * policy: the plan JSON of `vdnn-plan --backend cpu --format json` and of
 * `vdnn-train --backend cpu --plan-json FILE` are byte-identical (at the
 * default budget and at vdnn-plan's printed minimum budget), vdnn-train
 * trains at that minimum and exits 6 (VD_EBUDGET) one byte below it; the
 * same for LeNet in bf16 math (--math bf16).
 * Runs $VD_BUILDDIR/vdnn-plan and vdnn-train on $VD_SRCDIR/nets. */
#include <stdarg.h>
#include <jansson.h>
#include "tutil.h"
#include "plan/plan.h"
#include "backend/backend.h"

static char g_plan[1024], g_train[1024], g_src[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_plan, sizeof g_plan, "%s/vdnn-plan", b);
    snprintf(g_train, sizeof g_train, "%s/vdnn-train", b);
    snprintf(g_src, sizeof g_src, "%s", s);
}

/* Run bin with args (stderr kept apart when !merged); the exit status. */
static int run(const char *bin, char **out, bool merged, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int run(const char *bin, char **out, bool merged, const char *fmt, ...) {
    char a[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a, sizeof a, fmt, ap);
    va_end(ap);
    return vdt_run_bin(bin, a, merged, out);
}

/* vdnn-plan --min-budget --format json -> mins[policy]; extra: more
 * options of both tools ("" none; "--math bf16"). */
static void min_budgets(const char *net, int batch, const char *extra, uint64_t *mins) {
    char *out;
    int rc = run(g_plan, &out, false, "%s/nets/%s.yaml --backend cpu --batch %d --min-budget "
                 "--format json %s", g_src, net, batch, extra);
    ck_assert_msg(rc == 0, "vdnn-plan --min-budget: exit %d:\n%s", rc, out);
    for (int k = 0; k < VD_POLICY_COUNT; k++) {
        char key[32];
        snprintf(key, sizeof key, "\"%s\": ", vd_policy_name((vd_policy)k));
        const char *p = strstr(out, key);
        ck_assert_msg(p, "no %s in %s", key, out);
        unsigned long long v = 0;
        ck_assert(sscanf(p + strlen(key), "%llu", &v) == 1 && v > 0);
        mins[k] = v;
    }
    vd_free(out);
}

/* The plan JSON of both tools for net/batch/policy (budget 0: the default)
 * is the same; vdnn-train runs iters iterations with it (0: plans only). */
static void same_plan(const char *dir, const char *net, int batch, const char *policy,
                      uint64_t budget, int iters, const char *extra) {
    char bud[64] = "", pj[1200], tj[1200];
    if (budget) snprintf(bud, sizeof bud, "--budget %llu", (unsigned long long)budget);
    snprintf(pj, sizeof pj, "%s/plan.json", dir);
    snprintf(tj, sizeof tj, "%s/train.json", dir);
    unlink(tj);
    char *out;
    /* --quiet: a search over a second prints progress on stderr, which
     * run() appends to the output (the sanitizer build is that slow) */
    int rc = run(g_plan, &out, false, "%s/nets/%s.yaml --backend cpu --batch %d --policy %s %s "
                 "--format json --quiet %s", g_src, net, batch, policy, bud, extra);
    ck_assert_msg(rc == 0, "vdnn-plan %s %s %s: exit %d", net, policy, bud, rc);
    FILE *f = fopen(pj, "w");
    ck_assert(f && fputs(out, f) >= 0 && fclose(f) == 0);
    vd_free(out);
    rc = run(g_train, &out, true, "%s/nets/%s.yaml --backend cpu --batch %d --policy %s %s "
             "--iters %d --eval-every -1 --quiet --plan-json %s %s", g_src, net, batch, policy,
             bud, iters, tj, extra);
    ck_assert_msg(rc == 0, "vdnn-train %s %s %s: exit %d:\n%s", net, policy, bud, rc, out);
    vd_free(out);
    vdt_assert_same_file(pj, tj);
}

/* One byte below the minimum: vdnn-train exits 6 before training. */
static void below_min(const char *net, int batch, const char *policy, uint64_t min,
                      const char *extra) {
    char *out;
    int rc = run(g_train, &out, true, "%s/nets/%s.yaml --backend cpu --batch %d --policy %s "
                 "--budget %llu --iters 1 --eval-every -1 --quiet %s", g_src, net, batch, policy,
                 (unsigned long long)(min - 1), extra);
    ck_assert_msg(rc == VD_EBUDGET, "vdnn-train %s %s at %llu: exit %d:\n%s", net, policy,
                  (unsigned long long)(min - 1), rc, out);
    vd_free(out);
}

/* For each policy in pols (NULL-terminated; all when NULL); extra: more
 * options of both tools. */
static void check_net_as(const char *net, int batch, bool at_default, const char *const *pols,
                         const char *extra) {
    setup();
    char *d = vdt_tmpdir("vdnn-plan-match");
    uint64_t mins[VD_POLICY_COUNT];
    min_budgets(net, batch, extra, mins);
    for (int k = 0; k < VD_POLICY_COUNT; k++) {
        const char *p = vd_policy_name((vd_policy)k);
        bool want = !pols;
        for (int j = 0; pols && pols[j]; j++) want |= !strcmp(pols[j], p);
        if (!want) continue;
        if (at_default) same_plan(d, net, batch, p, 0, 0, extra);
        same_plan(d, net, batch, p, mins[k], 1, extra);   /* trains at the minimum */
        below_min(net, batch, p, mins[k], extra);
    }
    vdt_rmrf(d);
    vd_free(d);
}

static void check_net(const char *net, int batch, bool at_default, const char *const *pols) {
    check_net_as(net, batch, at_default, pols, "");
}

START_TEST(lenet_plan_is_what_train_runs) {
    check_net("lenet", 16, true, NULL);
}
END_TEST

/* Logical bytes of the feature maps (tensors of kind input, act, dact) in
 * the plan JSON of `vdnn-plan ARGS --format json` for LeNet. */
static uint64_t fmap_bytes(const char *args) {
    char *out;
    int rc = run(g_plan, &out, false, "%s/nets/lenet.yaml --backend cpu --batch 16 --format json "
                 "--quiet %s", g_src, args);
    ck_assert_msg(rc == 0, "vdnn-plan %s: exit %d", args, rc);
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    ck_assert_msg(root, "vdnn-plan %s: not JSON: %s", args, je.text);
    uint64_t sum = 0;
    int n = 0;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(root, "tensors"), i, t) {
        const char *kind = json_string_value(json_object_get(t, "kind"));
        ck_assert_ptr_nonnull(kind);
        if (strcmp(kind, "input") && strcmp(kind, "act") && strcmp(kind, "dact")) continue;
        sum += (uint64_t)json_integer_value(json_object_get(t, "bytes"));
        n++;
    }
    ck_assert_int_gt(n, 10);
    json_decref(root);
    vd_free(out);
    return sum;
}

/* bf16 math: the same for LeNet and every policy with --math bf16 (the
 * planner's 2-byte feature maps are what the executor allocates and
 * moves), and its feature maps are half fp32's bytes (--math fp32: the
 * default's). test_cli's math_spec_and_flag has --math against train.math. */
START_TEST(lenet_bf16_plan_is_what_train_runs) {
    check_net_as("lenet", 16, true, NULL, "--math bf16");
    uint64_t f32 = fmap_bytes("--policy none"), b16 = fmap_bytes("--policy none --math bf16");
    ck_assert_uint_eq(2 * b16, f32);
    ck_assert_uint_eq(fmap_bytes("--policy none --math fp32"), f32);
}
END_TEST

/* fp16 math: the same as bf16's (2-byte feature maps), and both tools keep
 * the gradient array that loss scaling needs (vd_plan_grads_array): the
 * plan vdnn-plan prints is the one vdnn-train runs, every policy. */
START_TEST(lenet_fp16_plan_is_what_train_runs) {
    check_net_as("lenet", 16, true, NULL, "--math fp16");
    uint64_t f32 = fmap_bytes("--policy none"), h16 = fmap_bytes("--policy none --math fp16");
    ck_assert_uint_eq(2 * h16, f32);
}
END_TEST

/* AlexNet: the minimum budgets only (each run allocates and poisons a pool
 * of about 700 MiB; the default budget is LeNet's case). One test per
 * policy, so that meson runs them in parallel (tests/train/meson.build). */
#define ALEX(pol)                                                             \
    START_TEST(alexnet_plan_is_what_train_runs_##pol) {                      \
        static const char *const pols[] = {#pol, NULL};                      \
        check_net("alexnet", 2, false, pols);                                \
    }                                                                         \
    END_TEST
ALEX(none)
ALEX(all)
ALEX(conv)
ALEX(dyn)
ALEX(auto)

/* One parser: the same spelling rules and the same --device in every tool. */
START_TEST(one_parser_for_every_tool) {
    setup();
    char bench[1100], predict[1100];
    snprintf(bench, sizeof bench, "%s/vdnn-bench", getenv("VD_BUILDDIR"));
    snprintf(predict, sizeof predict, "%s/vdnn-predict", getenv("VD_BUILDDIR"));
    const char *const tools[] = {g_plan, g_train, bench, predict};
    for (size_t t = 0; t < VD_ARRAY_LEN(tools); t++) {
        struct { const char *args, *want; } cases[] = {
            {"--bat 4", "did you mean '--batch'"},      /* no abbreviations */
            {"--batch", "'--batch' needs a value"},
            {"--deterministic=1", "'--deterministic=1' takes no value"},
            {"--device x", "--device: 'x' is not an integer"},
            {"--device -1", "--device"},
            {"--conv-tune fast", "expected on | off | retime"},
            {"--conv-split some", "expected auto | off | force"},
            {"--conv-topk 13", "--conv-topk"},
            {"--math fp8", "--math"},
        };
        for (size_t k = 0; k < VD_ARRAY_LEN(cases); k++) {
            char *out;
            int rc = run(tools[t], &out, true, "%s/nets/lenet.yaml %s", g_src, cases[k].args);
            ck_assert_msg(rc == VD_EUSAGE && strstr(out, cases[k].want), "%s %s: exit %d:\n%s",
                          tools[t], cases[k].args, rc, out);
            vd_free(out);
        }
    }
    /* --math fp16 plans for a device model too */
    {
        char *out;
        int rc = run(g_plan, &out, true, "%s/nets/lenet.yaml --math fp16 --gpu-model t4 --quiet",
                     g_src);
        ck_assert_msg(rc == 0, "vdnn-plan --math fp16 --gpu-model t4: exit %d:\n%s", rc, out);
        vd_free(out);
    }
    /* --device N is the CUDA index in vdnn-plan too (accepted, unused without
     * --backend cuda); --device cpu there is the old spelling of --gpu-model
     * (--quiet: a search over a second, as under the sanitizers, prints its
     * progress into the output compared) */
    char *a, *b;
    ck_assert_int_eq(run(g_plan, &a, false, "%s/nets/lenet.yaml --device 0 --quiet --min-budget "
                         "--format json", g_src), 0);
    ck_assert_int_eq(run(g_plan, &b, false, "%s/nets/lenet.yaml --gpu-model h200 --quiet "
                         "--min-budget --format json", g_src), 0);
    ck_assert_str_eq(a, b);
    vd_free(a);
    vd_free(b);
    ck_assert_int_eq(run(g_plan, &a, false, "%s/nets/lenet.yaml --device cpu --quiet --min-budget "
                         "--format json", g_src), 0);
    ck_assert_int_eq(run(g_plan, &b, false, "%s/nets/lenet.yaml --gpu-model cpu --quiet "
                         "--min-budget --format json", g_src), 0);
    ck_assert_str_eq(a, b);
    vd_free(a);
    vd_free(b);
    /* the default policy is auto in vdnn-plan as in vdnn-train */
    ck_assert_int_eq(run(g_plan, &a, false, "%s/nets/lenet.yaml --backend cpu --format json",
                         g_src), 0);
    ck_assert_msg(strstr(a, "\"policy\": \"auto\""), "%s", a);
    vd_free(a);
}
END_TEST

/* --backend auto falling back to the CPU says so loudly for a run sized for
 * a GPU (predicted over VD_CLI_AUTO_CPU_WARN_S = 60 s: LeNet b64 is 2.5e-3 s
 * an iteration on the CPU model, so 100000 iterations are about 4 min), and
 * not for a small run or with --backend cpu. --stop-at 1 keeps it short. */
START_TEST(auto_cpu_fallback_warns) {
    setup();
    if (vd_backend_cuda_available()) return;   /* auto picks the GPU there */
    const char *common = "--data synthetic:64,16 --eval-every -1 --stop-at 1";
    struct { const char *args; bool warn; } cases[] = {
        {"--iters 100000", true},
        {"--iters 100000 --quiet", true},
        {"--iters 100000 --backend cpu", false},
        {"--iters 2", false},
    };
    for (size_t k = 0; k < VD_ARRAY_LEN(cases); k++) {
        char *out;
        int rc = run(g_train, &out, true, "%s/nets/lenet.yaml %s %s", g_src, common,
                     cases[k].args);
        ck_assert_msg(rc == 0, "%s: exit %d:\n%s", cases[k].args, rc, out);
        bool warned = strstr(out, "WARNING: --backend auto fell back to the CPU") != NULL;
        ck_assert_msg(warned == cases[k].warn, "%s: warning %s expected:\n%s", cases[k].args,
                      cases[k].warn ? "" : "not", out);
        vd_free(out);
    }
}
END_TEST

VDT_MAIN("plan-match", 300, lenet_plan_is_what_train_runs, lenet_bf16_plan_is_what_train_runs,
         lenet_fp16_plan_is_what_train_runs,
         alexnet_plan_is_what_train_runs_none,
         alexnet_plan_is_what_train_runs_all, alexnet_plan_is_what_train_runs_conv,
         alexnet_plan_is_what_train_runs_dyn, alexnet_plan_is_what_train_runs_auto,
         one_parser_for_every_tool, auto_cpu_fallback_warns)
