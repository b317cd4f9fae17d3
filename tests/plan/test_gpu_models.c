/* test_gpu_models.c — the device models of vdnn-plan --gpu-model: the card
 * table against the published figures written out here again, the derived
 * parameters against the rule computed here independently (and the H200's
 * against the constants it had before the table), fp16 / tf32 / bf16 rates
 * in the analytic profile and in profile JSON, and the command line:
 * --list-gpu-models, an unknown model (exit 2, did-you-mean), bf16 on the
 * T4 (exit 8), the default budget of a card (its memory less the context
 * reserve, to the byte) and the largest batch that fits when the asked one
 * does not (it fits, one more does not). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "plan_common.h"
#include "profile/profile.h"
#include "util/json.h"
#include "vdt.h"

/* The published figures (dense peaks; memory as published and as offered),
 * written out again so that a typo in either copy fails. */
static const struct {
    const char *name;
    double gb, gib, bw, fp32, tf32, fp16, bf16;
    int gen, lanes;
    double nvlink;
} CARDS[] = {
    {"t4", 16, 15, 320e9, 8.1e12, 0, 65e12, 0, 3, 16, 0},
    {"l4", 24, 22.5, 300e9, 30.3e12, 60e12, 121e12, 121e12, 4, 16, 0},
    {"a10", 24, 22.5, 600e9, 31.2e12, 62.5e12, 125e12, 125e12, 4, 16, 0},
    {"a100-40g", 40, 40, 1555e9, 19.5e12, 156e12, 312e12, 312e12, 4, 16, 600e9},
    {"a100-80g", 80, 80, 2039e9, 19.5e12, 156e12, 312e12, 312e12, 4, 16, 600e9},
    {"rtx3060", 12, 12, 360e9, 12.74e12, 12.74e12, 25.5e12, 25.5e12, 4, 16, 0},
    {"rtx4060", 8, 8, 272e9, 15.11e12, 15.11e12, 30.2e12, 30.2e12, 4, 8, 0},
    {"rtx3090", 24, 24, 936e9, 35.6e12, 35.6e12, 71e12, 71e12, 4, 16, 0},
    {"rtx4090", 24, 24, 1008e9, 82.6e12, 82.6e12, 165.2e12, 165.2e12, 4, 16, 0},
    {"h100-pcie", 80, 79.5, 2.0e12, 51e12, 378e12, 756e12, 756e12, 5, 16, 0},
    {"h100-sxm", 80, 79.5, 3.35e12, 67e12, 494.5e12, 989.5e12, 989.5e12, 5, 16, 900e9},
    {"h200", 141, 140, 4.8e12, 67e12, 494.5e12, 989.5e12, 989.5e12, 5, 16, 900e9},
    {"b200", 180, 179, 8e12, 75e12, 1.125e15, 2.25e15, 2.25e15, 5, 16, 1.8e12},
};
#define N_CARDS ((int)(sizeof CARDS / sizeof CARDS[0]))

/* a and b equal but for the rounding of a different order of the same
 * operations (a few ulps): relative 1e-12 */
static void near(double a, double b, const char *what, const char *card) {
    ck_assert_msg(fabs(a - b) <= 1e-12 * fabs(b), "%s %s: %.17g, expected %.17g", card, what, a, b);
}

START_TEST(test_cards_table) {
    ck_assert_int_eq(vd_n_cards, N_CARDS);
    for (int k = 0; k < N_CARDS; k++) {
        const vd_card *c = vd_card_find(CARDS[k].name);
        ck_assert_msg(c, "card %s missing", CARDS[k].name);
        ck_assert_ptr_eq(vd_device_find(CARDS[k].name), &c->dev);
        ck_assert_str_eq(c->dev.name, CARDS[k].name);
        ck_assert(c->product && c->product[0] && c->source && c->source[0]);
        /* the published figures, exactly */
        ck_assert(c->mem_gb == CARDS[k].gb && c->mem_gib == CARDS[k].gib);
        ck_assert(c->mem_bw == CARDS[k].bw && c->fp32 == CARDS[k].fp32);
        ck_assert(c->tf32 == CARDS[k].tf32 && c->fp16 == CARDS[k].fp16 && c->bf16 == CARDS[k].bf16);
        ck_assert(c->pcie_gen == CARDS[k].gen && c->pcie_lanes == CARDS[k].lanes);
        ck_assert(c->nvlink_bw == CARDS[k].nvlink);
        /* the rule (profile.c, "Cards"), computed here in another order */
        const vd_device_params *d = &c->dev;
        const char *nm = c->name;
        double fp32 = CARDS[k].fp32 * (60.0 / 67.0);
        near(d->peak_flops, fp32, "peak_flops", nm);
        const double tc[3] = {CARDS[k].tf32, CARDS[k].fp16, CARDS[k].bf16};
        const double got[3] = {d->peak_flops_tf32, d->peak_flops_fp16, d->peak_flops_bf16};
        for (int j = 0; j < 3; j++) {
            double want = tc[j] == 0 ? 0 : fmax(tc[j] * (200.0 / 989.5), fp32);
            near(got[j], want, "tensor rate", nm);
        }
        double lane = CARDS[k].gen == 3 ? 0.78e9 : CARDS[k].gen == 4 ? 1.56e9 : 55e9 / 16;
        near(d->d2h_bw, lane * CARDS[k].lanes, "d2h_bw", nm);
        near(d->h2d_bw, lane * CARDS[k].lanes, "h2d_bw", nm);
        near(d->both_bw, lane * CARDS[k].lanes * 1.8, "both_bw", nm);
        near(d->allreduce_bw, CARDS[k].nvlink > 0 ? CARDS[k].nvlink / 3 : lane * CARDS[k].lanes,
             "allreduce_bw", nm);
        ck_assert(d->mem_bw == CARDS[k].bw && d->launch_s == 5e-6 && d->allreduce_lat_s == 20e-6);
        ck_assert(d->mem_bytes == (uint64_t)(CARDS[k].gib * 1024) << 20);
    }
    /* no bf16 on Turing, no tf32 either: those kinds are 0 (bf16 refused,
     * tf32 plain fp32) */
    const vd_card *t4 = vd_card_find("t4");
    ck_assert(t4->dev.peak_flops_bf16 == 0 && t4->dev.peak_flops_tf32 == 0);
    ck_assert(t4->dev.peak_flops_fp16 > t4->dev.peak_flops);
    ck_assert_ptr_null(vd_card_find("cpu"));
    ck_assert_ptr_eq(vd_device_find("cpu"), &vd_device_cpu);
    ck_assert_ptr_null(vd_device_find("h100"));
}
END_TEST

/* The H200's parameters are what they were before the table (exactly: the
 * plan tests pin plans made with them). */
START_TEST(test_h200_unchanged) {
    const vd_device_params *d[2] = {&vd_device_h200, &vd_card_find("h200")->dev};
    for (int k = 0; k < 2; k++) {
        ck_assert_str_eq(d[k]->name, "h200");
        ck_assert(d[k]->peak_flops == 60e12);
        ck_assert(d[k]->peak_flops_bf16 == 200e12);
        ck_assert(d[k]->mem_bw == 4.8e12);
        ck_assert(d[k]->d2h_bw == 55e9 && d[k]->h2d_bw == 55e9 && d[k]->both_bw == 99e9);
        ck_assert(d[k]->launch_s == 5e-6);
        ck_assert(d[k]->mem_bytes == (uint64_t)140 << 30);
        ck_assert(d[k]->allreduce_bw == 300e9 && d[k]->allreduce_lat_s == 20e-6);
        ck_assert(d[k]->peak_flops_fp16 == 200e12);   /* new: as bf16 */
    }
    ck_assert(memcmp(d[0], d[1], sizeof *d[0]) == 0);
}
END_TEST

/* Conv and fc run at the math's tensor rate: a compute-bound convolution
 * (VGG-16 features.2: 3.7 GFLOP a sample against 12.8 MB in fp16) takes
 * launch + FLOPs / rate; a profile saved and loaded keeps the rates. */
START_TEST(test_profile_rates) {
    static const struct { const char *card; vd_math math; } cases[] = {
        {"t4", VD_MATH_FP16}, {"t4", VD_MATH_FP32}, {"t4", VD_MATH_TF32},
        {"a100-40g", VD_MATH_TF32}, {"h200", VD_MATH_BF16}, {"rtx4090", VD_MATH_FP16},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        vd_net net;
        load_shipped_net(&net, "vgg16.yaml", 8);
        net.train.math = cases[k].math;
        const vd_device_params *d = vd_device_find(cases[k].card);
        vd_profile p;
        vd_err e = {0};
        ck_assert_int_eq(vd_profile_analytic(&net, 8, d, &p, &e), 0);
        int li = -1;
        for (int i = 0; i < net.n_layers; i++)
            if (!strcmp(net.layers[i].name, "features.2")) li = i;
        ck_assert_int_ge(li, 0);
        double rate = cases[k].math == VD_MATH_FP16 ? d->peak_flops_fp16
                    : cases[k].math == VD_MATH_BF16 ? d->peak_flops_bf16
                    : cases[k].math == VD_MATH_TF32 ? d->peak_flops_tf32 : 0;
        if (rate == 0) rate = d->peak_flops;   /* t4 tf32: plain fp32 */
        double flops = vd_net_layer_flops(&net, li) * 8;
        near(p.layers[li].algos[0].fwd_s, d->launch_s + flops / rate, "features.2 fwd_s",
             cases[k].card);
        ck_assert_int_eq(p.math, cases[k].math);
        /* JSON round trip of the rates (17 digits: exact) */
        char *dir = vdt_tmpdir("gpu-models");
        char path[1024];
        snprintf(path, sizeof path, "%s/p.json", dir);
        ck_assert_int_eq(vd_profile_save(path, &p, &e), 0);
        vd_profile q;
        ck_assert_msg(vd_profile_load(path, &net, 8, &q, &e) == 0, "%s", e.msg);
        ck_assert(q.dev.peak_flops == d->peak_flops && q.dev.peak_flops_fp16 == d->peak_flops_fp16 &&
                  q.dev.peak_flops_bf16 == d->peak_flops_bf16 &&
                  q.dev.peak_flops_tf32 == d->peak_flops_tf32 && q.dev.mem_bytes == d->mem_bytes);
        vd_profile_free(&q);
        vd_profile_free(&p);
        vdt_rmrf(dir);
        vd_free(dir);
        vd_net_free(&net);
    }
}
END_TEST

/* ---- vdnn-plan ------------------------------------------------------------ */

static char g_plan[1024], g_vgg[1024];

static void setup(void) {
    snprintf(g_plan, sizeof g_plan, "%s/vdnn-plan", getenv("VD_BUILDDIR"));
    snprintf(g_vgg, sizeof g_vgg, "%s/nets/vgg16.yaml", getenv("VD_SRCDIR"));
}

/* vdnn-plan with args (printf-style): its exit status; *out its stdout,
 * then its stderr (release with vd_free). */
static int plan(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int plan(char **out, const char *fmt, ...) {
    char args[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return vdt_run_bin(g_plan, args, false, out);
}

/* The JSON object at the start of out (stdout; stderr follows it). */
static json_t *json_of(const char *out) {
    char jerr[256];
    json_t *j = vd_json_parse(out, strlen(out), JSON_DISABLE_EOF_CHECK, jerr, sizeof jerr);
    ck_assert_msg(j, "not JSON (%s):\n%.2000s", jerr, out);
    return j;
}

static double real_at(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_number(v), "no number '%s'", key);
    return json_number_value(v);
}

static uint64_t uint_at(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_integer(v), "no integer '%s'", key);
    return (uint64_t)json_integer_value(v);
}

START_TEST(test_cli_list) {
    setup();
    char *out;
    ck_assert_int_eq(plan(&out, "--list-gpu-models --format json"), 0);
    json_t *j = json_of(out);
    ck_assert(uint_at(j, "context_reserve") == VD_DEVICE_CONTEXT_RESERVE);
    const json_t *arr = json_object_get(j, "gpu_models");
    ck_assert_int_eq((int)json_array_size(arr), N_CARDS);
    for (int k = 0; k < N_CARDS; k++) {
        const json_t *m = json_array_get(arr, (size_t)k);
        const vd_card *c = vd_card_find(json_string_value(json_object_get(m, "name")));
        ck_assert_msg(c && !strcmp(c->name, CARDS[k].name), "row %d", k);
        const json_t *pk = json_object_get(m, "peak_flops"), *d = json_object_get(m, "device");
        /* reals with 17 digits: exact */
        ck_assert(real_at(m, "memory_gb") == c->mem_gb && real_at(m, "memory_gib") == c->mem_gib);
        ck_assert(real_at(m, "mem_bw") == c->mem_bw && real_at(m, "nvlink_bw") == c->nvlink_bw);
        ck_assert(real_at(pk, "fp32") == c->fp32 && real_at(pk, "tf32") == c->tf32 &&
                  real_at(pk, "fp16") == c->fp16 && real_at(pk, "bf16") == c->bf16);
        ck_assert(uint_at(m, "pcie_gen") == (uint64_t)c->pcie_gen &&
                  uint_at(m, "pcie_lanes") == (uint64_t)c->pcie_lanes);
        ck_assert(real_at(d, "peak_flops") == c->dev.peak_flops &&
                  real_at(d, "peak_flops_fp16") == c->dev.peak_flops_fp16 &&
                  real_at(d, "peak_flops_bf16") == c->dev.peak_flops_bf16 &&
                  real_at(d, "peak_flops_tf32") == c->dev.peak_flops_tf32 &&
                  real_at(d, "d2h_bw") == c->dev.d2h_bw && real_at(d, "both_bw") == c->dev.both_bw);
        ck_assert(uint_at(d, "mem_bytes") == c->dev.mem_bytes);
        ck_assert(uint_at(m, "default_budget") == c->dev.mem_bytes - VD_DEVICE_CONTEXT_RESERVE);
        ck_assert_str_eq(json_string_value(json_object_get(m, "source")), c->source);
    }
    json_decref(j);
    vd_free(out);
    /* the table: a row per card with its source */
    ck_assert_int_eq(plan(&out, "--list-gpu-models"), 0);
    for (int k = 0; k < N_CARDS; k++) {
        char row[64];
        snprintf(row, sizeof row, "\n%-10s ", CARDS[k].name);
        ck_assert_msg(strstr(out, row) && strstr(out, vd_card_find(CARDS[k].name)->source),
                      "no row '%s' in:\n%s", CARDS[k].name, out);
    }
    vd_free(out);
    ck_assert_int_eq(plan(&out, "%s --list-gpu-models", g_vgg), VD_EUSAGE);
    vd_free(out);
}
END_TEST

START_TEST(test_cli_unknown_and_bf16) {
    setup();
    static const struct { const char *model, *want; } cases[] = {
        {"h100", "did you mean 'h100-pcie' or 'h100-sxm'?"},
        {"a100", "did you mean 'a100-40g' or 'a100-80g'?"},
        {"rtx390", "did you mean 'rtx3090'?"},
        {"T4", "did you mean 't4'?"},
        {"quadro", "unknown device model 'quadro' (known: t4 | l4 | a10 | a100-40g | a100-80g | "
                   "rtx3060 | rtx4060 | rtx3090 | rtx4090 | h100-pcie | h100-sxm | h200 | b200 | cpu;"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *out;
        int rc = plan(&out, "%s --gpu-model %s", g_vgg, cases[k].model);
        ck_assert_msg(rc == VD_EUSAGE && strstr(out, cases[k].want), "--gpu-model %s: exit %d:\n%s",
                      cases[k].model, rc, out);
        if (k == 4) ck_assert(!strstr(out, "did you mean"));
        vd_free(out);
    }
    /* bf16 on Turing: capability missing, naming the card and fp16 */
    char *out;
    int rc = plan(&out, "%s --batch 8 --math bf16 --gpu-model t4", g_vgg);
    ck_assert_msg(rc == VD_EUNSUPPORTED && strstr(out, "t4 (NVIDIA T4) has no bf16") &&
                  strstr(out, "--math fp16"), "exit %d:\n%s", rc, out);
    vd_free(out);
    /* where it has bf16 it plans */
    ck_assert_int_eq(plan(&out, "%s --batch 8 --math bf16 --gpu-model l4 --quiet", g_vgg), 0);
    vd_free(out);
}
END_TEST

/* VGG-16 b256 fp16 on the T4 without --budget: the budget is its 15 GiB less
 * the 640 MiB reserve, to the byte, and the plan fits. */
START_TEST(test_cli_t4_vgg16_fp16) {
    setup();
    char *out;
    int rc = plan(&out, "%s --batch 256 --math fp16 --gpu-model t4 --quiet --format json", g_vgg);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, out);
    json_t *j = json_of(out);
    const json_t *g = json_object_get(j, "gpu_model");
    ck_assert_msg(g, "no gpu_model");
    ck_assert(uint_at(g, "budget") == ((uint64_t)15 << 30) - ((uint64_t)640 << 20));
    ck_assert(uint_at(g, "memory_bytes") == (uint64_t)15 << 30);
    ck_assert(json_is_false(json_object_get(g, "budget_given")));
    ck_assert(json_is_true(json_object_get(g, "fits")));
    ck_assert_str_eq(json_string_value(json_object_get(g, "math")), "fp16");
    ck_assert(uint_at(j, "budget") <= uint_at(g, "budget"));   /* the pool: what it needs */
    ck_assert(uint_at(g, "pcie_bytes") == uint_at(j, "offload_bytes") +
              uint_at(j, "prefetch_bytes") + uint_at(j, "input_bytes"));
    /* 256 images per predicted iteration (a quotient: a few ulps) */
    near(real_at(g, "img_per_s"), 256.0 / real_at(j, "predicted_iter_s"), "img/s", "t4");
    json_decref(j);
    vd_free(out);
    /* the table ends with the answer */
    ck_assert_int_eq(plan(&out, "%s --batch 256 --math fp16 --gpu-model t4 --quiet", g_vgg), 0);
    ck_assert_msg(strstr(out, "on t4 (NVIDIA T4): budget 14.38 GiB = 15.00 GiB less 640 MiB") &&
                  strstr(out, "batch 256, fp16, policy auto: fits; predicted "), "%s", out);
    vd_free(out);
}
END_TEST

/* VGG-16 b256 fp32 fits the RTX 4060's 8 GiB with auto's split layers;
 * under the paper's dyn (nothing split) it does not: the answer is the
 * largest batch that does; it fits, and one more does not. */
START_TEST(test_cli_largest_batch) {
    setup();
    char *out;
    int rc = plan(&out, "%s --batch 256 --gpu-model rtx4060 --quiet --format json", g_vgg);
    ck_assert_msg(rc == 0, "auto: exit %d:\n%.3000s", rc, out);
    json_t *ja = json_of(out);
    ck_assert(json_is_true(json_object_get(json_object_get(ja, "gpu_model"), "fits")));
    json_decref(ja);
    vd_free(out);
    rc = plan(&out, "%s --batch 256 --gpu-model rtx4060 --policy dyn --quiet --format json", g_vgg);
    ck_assert_msg(rc == VD_EBUDGET, "exit %d:\n%.3000s", rc, out);
    json_t *j = json_of(out);
    const json_t *g = json_object_get(j, "gpu_model");
    ck_assert(json_is_false(json_object_get(g, "fits")));
    ck_assert(uint_at(g, "budget") == ((uint64_t)8 << 30) - ((uint64_t)640 << 20));
    int best = (int)uint_at(g, "largest_batch");
    ck_assert_msg(best > 0 && best < 256, "largest batch %d", best);
    ck_assert(real_at(g, "largest_batch_img_per_s") > 0);
    json_decref(j);
    vd_free(out);
    rc = plan(&out, "%s --batch %d --gpu-model rtx4060 --policy dyn --quiet --format json", g_vgg,
              best);
    ck_assert_msg(rc == 0, "batch %d: exit %d", best, rc);
    j = json_of(out);
    ck_assert(json_is_true(json_object_get(json_object_get(j, "gpu_model"), "fits")));
    json_decref(j);
    vd_free(out);
    rc = plan(&out, "%s --batch %d --gpu-model rtx4060 --policy dyn --quiet", g_vgg, best + 1);
    ck_assert_msg(rc == VD_EBUDGET && strstr(out, "does not fit; the largest batch that fits is"),
                  "batch %d: exit %d:\n%s", best + 1, rc, out);
    vd_free(out);
}
END_TEST

VDT_MAIN("gpu-models", 0, test_cards_table, test_h200_unchanged, test_profile_rates, test_cli_list,
         test_cli_unknown_and_bf16, test_cli_t4_vgg16_fp16, test_cli_largest_batch)
