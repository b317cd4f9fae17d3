/* test_predict.c — vdnn-predict: the inference plan (forward only, each
 * feature map freed after its last reader, the smallest budget; under a
 * small budget split layers, batch norm among them, and maps offloaded
 * between their readers, run by the CPU executor bit for bit), the
 * probabilities against their closed form, the class names a checkpoint
 * records, image files that fail among good ones, --data with a padded
 * last batch, --labels, and the exit statuses. Runs $VD_BUILDDIR/vdnn-predict
 * (and vdnn-train once) on specs and images written here; CPU backend. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "vdt.h"
#include "util/util.h"
#include "net/net.h"
#include "spec/spec.h"
#include "profile/profile.h"
#include "plan/plan.h"
#include "backend/backend.h"
#include "exec/exec.h"
#include "train/ckpt.h"
#include "config/predict_job.h"
#include "../train/tutil.h"

static char g_predict[1024], g_train[1024], g_src[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_predict, sizeof g_predict, "%s/vdnn-predict", b);
    snprintf(g_train, sizeof g_train, "%s/vdnn-train", b);
    snprintf(g_src, sizeof g_src, "%s", s);
}


/* A binary PGM of w x h pixels, every one of value v. */
static void write_pgm(const char *path, int w, int h, int v) {
    char buf[64 + 64 * 64];
    int k = snprintf(buf, sizeof buf, "P5\n%d %d\n255\n", w, h);
    ck_assert(w * h <= 64 * 64);
    memset(buf + k, v, (size_t)(w * h));
    tu_write(path, buf, (size_t)k + (size_t)(w * h));
}


/* "vdnn-predict ARGS": its exit status; stdout then stderr in *out. */
static int predict(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int predict(char **out, const char *fmt, ...) {
    char a[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a, sizeof a, fmt, ap);
    va_end(ap);
    return vdt_run_bin(g_predict, a, false, out);
}

/* The JSON objects of out's lines that start with '{' (stderr's lines do
 * not), parsed with jansson: their count, into v[] (json_decref each). */
static int json_lines(const char *out, json_t **v, int max) {
    int n = 0;
    for (const char *l = out; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        if (len && l[0] == '{') {
            ck_assert_int_lt(n, max);
            json_error_t je;
            v[n] = json_loadb(l, len, 0, &je);
            ck_assert_msg(v[n] != NULL, "not JSON (%s): %.*s", je.text, (int)len, l);
            n++;
        }
        l = nl ? nl + 1 : NULL;
    }
    return n;
}

/* The net of the closed-form test: a 1x4x4 image, flattened, one fully
 * connected layer to 3 classes, the softmax. */
static const char NET_FC[] =
    "name: fc3\n"
    "input: { channels: 1, height: 4, width: 4, classes: 3 }\n"
    "train: { batch: 2 }\n"
    "layers:\n"
    "  - { name: flatten, type: flatten }\n"
    "  - { name: fc, type: fc, out: 3 }\n"
    "  - { name: loss, type: softmax_cross_entropy }\n";

/* fc: logit_k = S[k] * mean(x) + BIAS[k] (every weight of row k is S[k] / 16) */
static const double S[3] = { -1.0, 0.5, 2.0 }, BIAS[3] = { 0.3, -0.1, 0.2 };

/* Write NET_FC's spec and a checkpoint of those weights into dir. */
static void fc_net(const char *dir, char *spec, char *ckpt, size_t n) {
    snprintf(spec, n, "%s/fc3.yaml", dir);
    snprintf(ckpt, n, "%s/fc3.safetensors", dir);
    tu_write(spec, NET_FC, sizeof NET_FC - 1);
    vd_net net;
    vd_net_init(&net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(spec, &net, &e) == 0, "%s", e.msg);
    float *p = calloc((size_t)net.param_floats, sizeof *p);
    ck_assert(p != NULL);
    for (int i = 0; i < net.n_params; i++) {
        const vd_param *pr = &net.params[i];
        for (int64_t k = 0; k < pr->numel; k++)
            p[pr->offset + k] = !strcmp(pr->name, "fc.weight") ? (float)(S[k / 16] / 16.0)
                                                               : (float)BIAS[k];
    }
    vd_train_state st = {0};
    ck_assert_msg(vd_ckpt_save(ckpt, &net, p, NULL, &st, &e) == 0, "%s", e.msg);
    free(p);
    vd_net_free(&net);
}

/* The closed form: a uniform gray image of value v is x = (v / 255 - 0.449)
 * / 0.226 everywhere (folder:DIR's 1-channel normalisation; resizing a
 * uniform image changes nothing), so logit_k = S[k] x + BIAS[k]. */
static void closed_form(int v, double *prob) {
    double x = ((double)v / 255.0 - 0.449) / 0.226, l[3], m = -INFINITY, s = 0;
    for (int k = 0; k < 3; k++) { l[k] = S[k] * x + BIAS[k]; if (l[k] > m) m = l[k]; }
    for (int k = 0; k < 3; k++) s += exp(l[k] - m);
    for (int k = 0; k < 3; k++) prob[k] = exp(l[k] - m) / s;
}

/* ---- the inference plan --------------------------------------------------- */

START_TEST(inference_plan_frees_after_last_reader) {
    setup();
    char spec[1100];
    snprintf(spec, sizeof spec, "%s/nets/tiny-resnet.yaml", g_src);
    vd_net net;
    vd_net_init(&net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(spec, &net, &e) == 0, "%s", e.msg);
    vd_schedule_inplace(&net);
    vd_profile prof;
    ck_assert_msg(vd_profile_analytic(&net, 8, vd_device_find("cpu"), &prof, &e) == 0, "%s", e.msg);
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = 8;
    o.forward_only = true;
    o.policy = VD_POLICY_ALL;   /* ignored: without a budget an inference plan offloads nothing */
    vd_plan p;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    ck_assert(p.forward_only && p.feasible && !p.eval);
    ck_assert_int_eq(p.n_steps, net.n_layers);
    ck_assert_int_eq(p.t_mom, -1);               /* no optimizer state ... */
    ck_assert_int_eq(p.t_grads, -1);             /* ... nor gradients */
    /* the parameters alone (a region's bytes are 256-aligned: vd_interval) */
    ck_assert_uint_eq(p.persistent_bytes, VD_ALIGN_UP((uint64_t)net.param_floats * 4u, 256u));
    ck_assert_uint_eq(p.host_bytes, 0);
    ck_assert_uint_eq(p.offload_bytes, 0);
    /* every feature map: one region, from its writer to its last reader (the
     * steps of the units that read or write it, from the net's inputs; the
     * loss's output is read back after the last step) */
    int maps = 0;
    for (int t = 0; t < p.n_tensors; t++) {
        const vd_tensor *T = &p.tensors[t];
        ck_assert_msg(T->kind != VD_T_DACT && T->kind != VD_T_GRADS, "%s", T->name);
        if (T->kind != VD_T_ACT) continue;
        int first = -1, last = -1;
        for (int u = 0; u < p.n_units; u++) {
            const vd_layer *l = &net.layers[p.layers[u].layer];
            bool uses = p.layers[u].y == t;
            for (int k = 0; k < l->n_in; k++) uses |= p.layers[u].in_t[k] == t;
            if (!uses) continue;
            if (first < 0) first = u;
            last = u;
        }
        ck_assert_msg(!T->offload && !T->recompute && T->n_iv == 1, "%s", T->name);
        const vd_interval *iv = &p.intervals[T->iv[0]];
        ck_assert_msg(iv->first == first && iv->last == last, "%s lives over steps %d..%d, "
                      "used over %d..%d", T->name, iv->first, iv->last, first, last);
        maps++;
    }
    ck_assert_int_gt(maps, 10);
    /* the smallest budget fits, 256 bytes less does not: exit 6's message */
    uint64_t minb = 0;
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &minb, &e) == 0, "%s", e.msg);
    ck_assert_uint_le(minb, p.budget);
    vd_plan q;
    o.budget = minb;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &q, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(q.budget, minb);
    vd_plan_free(&q);
    o.budget = minb - 256;
    ck_assert_int_eq(vd_plan_build(&net, &prof, &o, &q, &e), VD_EBUDGET);
    ck_assert_msg(strstr(e.msg, "offloaded between two") && strstr(e.msg, "the smallest budget that fits"),
                  "%s", e.msg);
    vd_plan_free(&q);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

START_TEST(topk_order_and_ties) {
    static const float p[6] = { 0.1f, 0.3f, 0.05f, 0.3f, 0.2f, 0.05f };
    static const int want[6] = { 1, 3, 4, 0, 2, 5 };   /* ties: the lower index first */
    for (int k = 1; k <= 6; k++) {
        int top[6] = { -1, -1, -1, -1, -1, -1 };
        vd_predict_topk(p, 6, k, top);
        for (int q = 0; q < 6; q++) ck_assert_int_eq(top[q], q < k ? want[q] : -1);
    }
}
END_TEST

/* ---- the probabilities ---------------------------------------------------- */

START_TEST(probabilities_match_closed_form) {
    setup();
    char *d = vdt_tmpdir("vdnn-predict");
    char spec[1100], ck[1100], img[3][1100];
    fc_net(d, spec, ck, sizeof spec);
    static const int V[3] = { 0, 100, 255 };   /* tops: class 0, 0, 2 */
    for (int i = 0; i < 3; i++) {
        snprintf(img[i], sizeof img[i], "%s/gray%d.pgm", d, V[i]);
        write_pgm(img[i], 4, 4, V[i]);
    }
    char *jl, *tab;
    /* batch 2: the second pass holds one image and one slot of padding */
    ck_assert_int_eq(predict(&jl, "%s --init %s --backend cpu --batch 2 --top-k 3 --format jsonl "
                             "--quiet %s %s %s", spec, ck, img[0], img[1], img[2]), 0);
    ck_assert_int_eq(predict(&tab, "%s --init %s --backend cpu --batch 2 --top-k 3 --quiet "
                             "%s %s %s", spec, ck, img[0], img[1], img[2]), 0);
    json_t *v[8];
    ck_assert_int_eq(json_lines(jl, v, 8), 3);
    const char *row = strchr(tab, '\n');    /* after the header */
    ck_assert(row != NULL);
    for (int i = 0; i < 3; i++) {
        double want[3];
        closed_form(V[i], want);
        ck_assert_str_eq(json_string_value(json_object_get(v[i], "image")), img[i]);
        json_t *top = json_object_get(v[i], "top");
        ck_assert_uint_eq(json_array_size(top), 3);
        /* the table's row: the image, then the same classes, probabilities to 4 decimals */
        row++;
        ck_assert_msg(!strncmp(row, img[i], strlen(img[i])), "row %d: %s", i, row);
        const char *at = row + strlen(img[i]);
        double prev = 2;
        for (int q = 0; q < 3; q++) {
            json_t *t = json_array_get(top, (size_t)q);
            int c = (int)json_integer_value(json_object_get(t, "index"));
            double pr = json_real_value(json_object_get(t, "prob"));
            ck_assert(c >= 0 && c < 3);
            /* no names recorded: the class is its index */
            char cs[8];
            snprintf(cs, sizeof cs, "%d", c);
            ck_assert_str_eq(json_string_value(json_object_get(t, "class")), cs);
            /* 1e-5: the input is normalised in float (relative 6e-8 of |x| < 2.5), the
             * logits summed and the softmax rounded to float, then printed to 9 digits */
            ck_assert_msg(fabs(pr - want[c]) < 1e-5, "gray %d, class %d: %.9g, closed form %.9g",
                          V[i], c, pr, want[c]);
            ck_assert(pr <= prev);   /* most probable first */
            prev = pr;
            int tc, used = 0;
            double tp;
            ck_assert_msg(sscanf(at, " %d %lf%n", &tc, &tp, &used) == 2, "row %d: %s", i, row);
            ck_assert_int_eq(tc, c);
            /* the table rounds to 4 decimals: half a unit of the last, and the 1e-5 above */
            ck_assert_msg(fabs(tp - pr) <= 0.5e-4 + 1e-5, "table %.4f, jsonl %.9g", tp, pr);
            at += used;
        }
        row = strchr(row, '\n');
        ck_assert(row != NULL);
        json_decref(v[i]);
    }
    vd_free(jl);
    vd_free(tab);
    /* math bf16: the image, the weights' copy and the probabilities in bf16
     * (8 significant bits): the same order, the values within 2% */
    ck_assert_int_eq(predict(&jl, "%s --init %s --backend cpu --math bf16 --top-k 3 --format "
                             "jsonl --quiet %s", spec, ck, img[1]), 0);
    ck_assert_int_eq(json_lines(jl, v, 8), 1);
    double want[3];
    closed_form(V[1], want);
    json_t *top = json_object_get(v[0], "top");
    for (int q = 0; q < 3; q++) {
        json_t *t = json_array_get(top, (size_t)q);
        int c = (int)json_integer_value(json_object_get(t, "index"));
        double pr = json_real_value(json_object_get(t, "prob"));
        ck_assert_msg(fabs(pr - want[c]) < 0.02, "bf16 class %d: %g, closed form %g", c, pr, want[c]);
        int above = 0;   /* classes more probable than c in the closed form */
        for (int k = 0; k < 3; k++) above += want[k] > want[c];
        ck_assert_int_eq(above, q);
    }
    json_decref(v[0]);
    vd_free(jl);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- class names, failures, --data ----------------------------------------- */

/* A folder data set of 8x8 gray images in dir/data: classes cat, dog, eel
 * of values 20, 120, 220 (two train images each, val: one each, cat's val
 * image bad_val: a PNG that does not decode), and a net for it. */
static const char NET_GRAY[] =
    "name: gray3\n"
    "input: { channels: 1, height: 8, width: 8, classes: 3 }\n"
    "train: { batch: 3, lr: 0.1 }\n"
    "layers:\n"
    "  - { name: flatten, type: flatten }\n"
    "  - { name: fc, type: fc, out: 3 }\n"
    "  - { name: loss, type: softmax_cross_entropy }\n";
static void gray_folder(const char *dir, bool bad_val) {
    static const char *const cls[3] = { "cat", "dog", "eel" };
    char p[1200];
    for (int s = 0; s < 2; s++) {
        snprintf(p, sizeof p, "%s/data", dir);
        mkdir(p, 0777);   /* the second time: it exists */
        snprintf(p, sizeof p, "%s/data/%s", dir, s ? "val" : "train");
        ck_assert_int_eq(mkdir(p, 0777), 0);
        for (int c = 0; c < 3; c++) {
            snprintf(p, sizeof p, "%s/data/%s/%s", dir, s ? "val" : "train", cls[c]);
            ck_assert_int_eq(mkdir(p, 0777), 0);
            for (int i = 0; i < (s ? 1 : 2); i++) {
                snprintf(p, sizeof p, "%s/data/%s/%s/%d.%s", dir, s ? "val" : "train", cls[c], i,
                         s && c == 0 && bad_val ? "png" : "pgm");
                if (s && c == 0 && bad_val) tu_write_bad_png(p);
                else write_pgm(p, 8, 8, 20 + 100 * c + 5 * i);
            }
        }
    }
}

/* gray_folder in dir, NET_GRAY in dir/gray3.yaml (spec) and one training
 * iteration of it on the folder saved to dir/gray3.safetensors (ck): a
 * checkpoint that records the class directories. spec and ck hold n. */
static void gray_trained(const char *dir, bool bad_val, char *spec, char *ck, size_t n) {
    char a[4096], *out;
    snprintf(spec, n, "%s/gray3.yaml", dir);
    tu_write(spec, NET_GRAY, sizeof NET_GRAY - 1);
    gray_folder(dir, bad_val);
    snprintf(ck, n, "%s/gray3.safetensors", dir);
    snprintf(a, sizeof a, "%s --data folder:%s/data --backend cpu --iters 1 --eval-every -1 "
             "--save %s --quiet", spec, dir, ck);
    ck_assert_msg(vdt_run_bin(g_train, a, true, &out) == 0, "%s", out);
    vd_free(out);
}

START_TEST(class_names_round_trip) {
    setup();
    char *d = vdt_tmpdir("vdnn-predict");
    char spec[1100], ck[1100], img[1100];
    gray_trained(d, false, spec, ck, sizeof spec);
    char *out;
    /* the checkpoint records the class directories, in label order */
    vd_net net;
    vd_net_init(&net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(spec, &net, &e) == 0, "%s", e.msg);
    float *p = calloc((size_t)net.param_floats, sizeof *p);
    vd_ckpt_classes names;
    ck_assert_msg(vd_ckpt_load_model_ex(ck, &net, p, NULL, &names, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(names.n, 3);
    ck_assert_str_eq(names.names[0], "cat");
    ck_assert_str_eq(names.names[1], "dog");
    ck_assert_str_eq(names.names[2], "eel");
    vd_ckpt_classes_free(&names);
    free(p);
    vd_net_free(&net);
    /* vdnn-predict prints them: every class once among the top 3 */
    snprintf(img, sizeof img, "%s/data/val/dog/0.pgm", d);
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --format jsonl --quiet %s", spec,
                             ck, img), 0);
    json_t *v[8];
    ck_assert_int_eq(json_lines(out, v, 8), 1);
    json_t *top = json_object_get(v[0], "top");
    ck_assert_uint_eq(json_array_size(top), 3);   /* --top-k 5 of 3 classes */
    int seen = 0;
    for (size_t q = 0; q < 3; q++) {
        json_t *t = json_array_get(top, q);
        const char *c = json_string_value(json_object_get(t, "class"));
        int idx = (int)json_integer_value(json_object_get(t, "index"));
        ck_assert_str_eq(c, idx == 0 ? "cat" : idx == 1 ? "dog" : "eel");
        seen |= 1 << idx;
    }
    ck_assert_int_eq(seen, 7);
    json_decref(v[0]);
    vd_free(out);
    /* --labels over them; a count that is not the net's: exit 2 */
    char lab[1100];
    snprintf(lab, sizeof lab, "%s/labels.txt", d);
    const char *names3 = "Felis\nCanis\r\nAnguilla\n";
    tu_write(lab, names3, strlen(names3));
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --top-k 3 --labels %s --format "
                             "jsonl --quiet %s", spec, ck, lab, img), 0);
    ck_assert_int_eq(json_lines(out, v, 8), 1);
    top = json_object_get(v[0], "top");
    for (size_t q = 0; q < 3; q++) {
        json_t *t = json_array_get(top, q);
        int idx = (int)json_integer_value(json_object_get(t, "index"));
        ck_assert_str_eq(json_string_value(json_object_get(t, "class")),
                         idx == 0 ? "Felis" : idx == 1 ? "Canis" : "Anguilla");
    }
    json_decref(v[0]);
    vd_free(out);
    tu_write(lab, "Felis\nCanis\n", 12);
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --labels %s %s", spec, ck, lab,
                             img), 2);
    ck_assert_msg(strstr(out, "2 names") && strstr(out, "3 classes"), "%s", out);
    vd_free(out);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(bad_images_among_good_ones) {
    setup();
    char *d = vdt_tmpdir("vdnn-predict");
    char spec[1100], ck[1100], good[2][1100], bad[1100], gone[1100];
    fc_net(d, spec, ck, sizeof spec);
    for (int i = 0; i < 2; i++) {
        snprintf(good[i], sizeof good[i], "%s/good%d.pgm", d, i);
        write_pgm(good[i], 4, 4, 255 * i);
    }
    snprintf(bad, sizeof bad, "%s/bad.png", d);
    tu_write_bad_png(bad);
    snprintf(gone, sizeof gone, "%s/no-such.png", d);
    /* a decoding error first, then a file that cannot be read: exit 5, the
     * first one's; every line in order, the good ones classified */
    char *out;
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --format jsonl --quiet %s %s %s %s",
                             spec, ck, good[0], bad, gone, good[1]), 5);
    json_t *v[8];
    ck_assert_int_eq(json_lines(out, v, 8), 4);
    const char *want[4] = { good[0], bad, gone, good[1] };
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(json_string_value(json_object_get(v[i], "image")), want[i]);
        bool failed = i == 1 || i == 2;
        ck_assert_int_eq(json_object_get(v[i], "error") != NULL, failed);
        ck_assert_int_eq(json_object_get(v[i], "top") != NULL, !failed);
        if (failed)
            ck_assert_msg(strstr(json_string_value(json_object_get(v[i], "error")), want[i]),
                          "%s", out);
    }
    /* the two good ones, as alone: gray 0 is class 0, gray 255 class 2 */
    for (int i = 0; i < 2; i++) {
        json_t *t = json_array_get(json_object_get(v[3 * i], "top"), 0);
        ck_assert_int_eq(json_integer_value(json_object_get(t, "index")), 2 * i);
    }
    for (int i = 0; i < 4; i++) json_decref(v[i]);
    ck_assert_msg(strstr(out, "2 of 4 images could not be classified"), "%s", out);
    vd_free(out);
    /* the table: the error on the image's line */
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --quiet %s %s", spec, ck, gone,
                             good[0]), 4);
    char line[1300];
    snprintf(line, sizeof line, "%s  error: %s", gone, gone);
    ck_assert_msg(strstr(out, line), "%s", out);
    vd_free(out);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(data_split_padded_and_scored) {
    setup();
    char *d = vdt_tmpdir("vdnn-predict");
    char spec[1100], ck[1100];
    gray_trained(d, true, spec, ck, sizeof spec);
    char *out;
    /* 3 held-out images at batch 2: the second batch is padded; cat's image
     * does not decode: its line says so, the other two are scored, exit 5 */
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --data folder:%s/data --batch 2 "
                             "--top-k 2 --format jsonl --quiet", spec, ck, d), 5);
    json_t *v[8];
    ck_assert_int_eq(json_lines(out, v, 8), 4);
    int hits1 = 0, hits2 = 0;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(json_integer_value(json_object_get(v[i], "index")), i);
        if (i == 0) {   /* not read: its label is not known either */
            ck_assert_msg(strstr(json_string_value(json_object_get(v[i], "error")), "0.png") &&
                          !json_object_get(v[i], "label"), "%s", out);
            continue;
        }
        int label = (int)json_integer_value(json_object_get(v[i], "label_index"));
        ck_assert_int_eq(label, i);   /* val: cat, dog, eel, one each */
        ck_assert_str_eq(json_string_value(json_object_get(v[i], "label")),
                         i == 1 ? "dog" : "eel");
        json_t *top = json_object_get(v[i], "top");
        ck_assert_uint_eq(json_array_size(top), 2);
        for (int q = 0; q < 2; q++) {
            int c = (int)json_integer_value(json_object_get(json_array_get(top, (size_t)q), "index"));
            hits1 += q == 0 && c == label;
            hits2 += c == label;
        }
    }
    json_t *s = json_object_get(v[3], "summary");
    ck_assert_int_eq(json_integer_value(json_object_get(s, "images")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "failed")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "k")), 2);
    ck_assert(fabs(json_real_value(json_object_get(s, "top1")) - hits1 / 2.0) < 1e-12);
    ck_assert(fabs(json_real_value(json_object_get(s, "top_k")) - hits2 / 2.0) < 1e-12);
    for (int i = 0; i < 4; i++) json_decref(v[i]);
    vd_free(out);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(usage_and_budget_errors) {
    setup();
    char *d = vdt_tmpdir("vdnn-predict");
    char spec[1100], ck[1100], img[1100];
    fc_net(d, spec, ck, sizeof spec);
    snprintf(img, sizeof img, "%s/gray.pgm", d);
    write_pgm(img, 4, 4, 9);
    static const struct { int rc; const char *args, *msg; } cases[] = {
        { 2, "%s %s", "--init FILE is required" },
        { 2, "%s --init %s", "nothing to classify" },
        { 2, "%s --init %s --data synthetic %s", "not both" },
        { 2, "%s --init %s --top-k 0 %s", "--top-k" },
        { 2, "%s --init %s --format csv %s", "table | jsonl" },
        { 2, "%s --init %s --loader-threads 2 %s", "--data" },
        { 6, "%s --init %s --budget 1K %s", "the smallest budget that fits" },
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++) {
        char *out;
        const char *x = strstr(cases[i].args, "--init") ? ck : img;
        int rc = predict(&out, cases[i].args, spec, x, img);
        ck_assert_msg(rc == cases[i].rc && strstr(out, cases[i].msg), "case %zu: exit %d:\n%s",
                      i, rc, out);
        vd_free(out);
    }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- split layers under a small budget ------------------------------------ */

/* The lines of out that start with '{' (the JSON results), in order. */
static void result_lines(const char *out, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (const char *l = out; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) + 1 : strlen(l);
        if (l[0] == '{') {
            ck_assert_uint_lt(at + len, n);
            memcpy(buf + at, l, len);
            buf[at += len] = '\0';
        }
        l = nl ? nl + 1 : NULL;
    }
}

START_TEST(small_budget_splits_layers) {
    setup();
    char *d = vdt_tmpdir("vdnn-predict");
    char spec[1100], ck[1100], img[3][1100], imgs[3400];
    snprintf(spec, sizeof spec, "%s/nets/lenet.yaml", g_src);
    snprintf(ck, sizeof ck, "%s/lenet.safetensors", d);
    vd_net net;
    vd_net_init(&net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(spec, &net, &e) == 0, "%s", e.msg);
    /* weights of a fixed pattern (no training: the probabilities are compared
     * between plans, not to a closed form) */
    float *w = calloc((size_t)net.param_floats, sizeof *w);
    ck_assert(w != NULL);
    for (int64_t i = 0; i < net.param_floats; i++) w[i] = (float)(0.2 * sin(0.37 * (double)i + 1.0));
    vd_train_state st = {0};
    ck_assert_msg(vd_ckpt_save(ck, &net, w, NULL, &st, &e) == 0, "%s", e.msg);
    free(w);
    /* three 28x28 images of different gradients */
    for (int i = 0; i < 3; i++) {
        char buf[32 + 28 * 28];
        int k = snprintf(buf, sizeof buf, "P5\n28 28\n255\n");
        for (int q = 0; q < 28 * 28; q++) buf[k + q] = (char)((q % 28 * 7 + q / 28 * (13 + i) + 40 * i) % 256);
        snprintf(img[i], sizeof img[i], "%s/digit%d.pgm", d, i);
        tu_write(img[i], buf, (size_t)k + 28 * 28);
    }
    snprintf(imgs, sizeof imgs, "%s %s %s", img[0], img[1], img[2]);
    /* the budgets, planned with the profile the unconstrained run used
     * (--profile-out): the whole batch's need, and the floor with split
     * layers below it */
    const int B = 8;
    char prof_path[1100], *full, *out, want[4096], got[4096], fb[32];
    snprintf(prof_path, sizeof prof_path, "%s/lenet.profile.json", d);
    ck_assert_int_eq(predict(&full, "%s --init %s --backend cpu --batch %d --top-k 10 --format "
                             "jsonl --quiet --profile-out %s %s", spec, ck, B, prof_path, imgs), 0);
    vd_schedule_inplace(&net);
    vd_profile prof;
    ck_assert_msg(vd_profile_load(prof_path, &net, B, &prof, &e) == 0, "%s", e.msg);
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = B;
    o.forward_only = true;
    vd_plan whole, split;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &whole, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(whole.n_units, net.n_layers);
    uint64_t floor_b = 0;
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &floor_b, &e) == 0, "%s", e.msg);
    ck_assert_uint_lt(floor_b, whole.hwm);
    /* 256 bytes below the whole plan's need: split, with the same (fastest)
     * options, so on the CPU each sample's arithmetic is the whole batch's */
    uint64_t tight = whole.hwm - 256;
    o.budget = tight;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &split, &e) == 0, "%s", e.msg);
    ck_assert_int_gt(split.n_units, net.n_layers);
    ck_assert_uint_le(split.hwm, tight);
    for (int i = 0; i < net.n_layers; i++)
        ck_assert_int_eq(split.layers[split.first_unit[i]].algo_fwd,
                         whole.layers[whole.first_unit[i]].algo_fwd);
    vd_plan_free(&split);
    /* the floor fits, 256 bytes less does not */
    o.budget = floor_b;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &split, &e) == 0, "%s", e.msg);
    ck_assert_int_gt(split.n_units, net.n_layers);
    vd_plan_free(&split);
    o.budget = floor_b - 256;
    ck_assert_int_eq(vd_plan_build(&net, &prof, &o, &split, &e), VD_EBUDGET);
    vd_plan_free(&split);
    vd_plan_free(&whole);
    vd_profile_free(&prof);

    result_lines(full, want, sizeof want);
    /* the tight budget: split, the probabilities identical bit for bit (jsonl
     * prints 9 significant digits: a float's round trip) */
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --batch %d --top-k 10 --format "
                             "jsonl --budget %llu %s", spec, ck, B, (unsigned long long)tight,
                             imgs), 0);
    ck_assert_msg(strstr(out, "plan: split layers:") && strstr(out, "batch chunks"), "%s", out);
    result_lines(out, got, sizeof got);
    ck_assert_str_eq(got, want);
    vd_free(out);
    /* the floor: runs split; the same classes in the same order, the
     * probabilities within 1e-5 (its convolutions may take the least-workspace
     * option, which sums in another order: a few float roundings of
     * logits of magnitude < 10) */
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --batch %d --top-k 10 --format "
                             "jsonl --budget %llu %s", spec, ck, B, (unsigned long long)floor_b,
                             imgs), 0);
    ck_assert_msg(strstr(out, "plan: split layers:"), "%s", out);
    json_t *a[4], *b[4];
    ck_assert_int_eq(json_lines(full, a, 4), 3);
    ck_assert_int_eq(json_lines(out, b, 4), 3);
    for (int i = 0; i < 3; i++) {
        json_t *ta = json_object_get(a[i], "top"), *tb = json_object_get(b[i], "top");
        ck_assert_uint_eq(json_array_size(ta), 10);
        ck_assert_uint_eq(json_array_size(tb), 10);
        for (size_t q = 0; q < 10; q++) {
            json_t *x = json_array_get(ta, q), *y = json_array_get(tb, q);
            ck_assert_int_eq(json_integer_value(json_object_get(x, "index")),
                             json_integer_value(json_object_get(y, "index")));
            ck_assert(fabs(json_real_value(json_object_get(x, "prob")) -
                           json_real_value(json_object_get(y, "prob"))) < 1e-5);
        }
        json_decref(a[i]);
        json_decref(b[i]);
    }
    vd_free(out);
    vd_free(full);
    /* below the floor: exit 6 naming it and the split it takes */
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --batch %d --budget %llu %s", spec,
                             ck, B, (unsigned long long)(floor_b - 256), imgs), 6);
    char msg[160];
    snprintf(msg, sizeof msg, "the smallest budget that fits is %s (%llu bytes), its largest "
             "layers split in", vd_fmt_bytes(floor_b, fb, sizeof fb), (unsigned long long)floor_b);
    ck_assert_msg(strstr(out, msg) && strstr(out, "batch chunks"), "%s", out);
    vd_free(out);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- offloads under a budget splitting cannot meet -------------------------- */

/* A residual net whose block input (stem.relu, 4 channels) waits for the
 * add through a branch that widens to 32 channels: splitting the wide
 * layers (b.conv2 .. b.conv3) in batch chunks leaves it whole beside them
 * (b.conv1, which reads it, has maps too small to split), so offloading it
 * across the branch lowers the floor that splitting alone reaches. */
static const char NET_RES[] =
    "name: res-offload\n"
    "input: { channels: 3, height: 16, width: 16, classes: 5 }\n"
    "train: { batch: 4 }\n"
    "layers:\n"
    "  - { name: stem, type: conv, out: 4, kernel: 3, pad: 1 }\n"
    "  - { name: stem.bn, type: batchnorm }\n"
    "  - { name: stem.relu, type: relu }\n"
    "  - { name: b.conv1, type: conv, out: 2, kernel: 1 }\n"
    "  - { name: b.relu1, type: relu }\n"
    "  - { name: b.conv2, type: conv, out: 32, kernel: 3, pad: 1 }\n"
    "  - { name: b.relu2, type: relu }\n"
    "  - { name: b.conv3, type: conv, out: 4, kernel: 1 }\n"
    "  - { name: b.bn3, type: batchnorm }\n"
    "  - { name: add, type: add, inputs: [b.bn3, stem.relu] }\n"
    "  - { name: relu, type: relu }\n"
    "  - { name: pool, type: pool, mode: avg, global: true }\n"
    "  - { name: fc, type: fc, out: 5 }\n"
    "  - { name: loss, type: softmax_cross_entropy }\n";

/* The class probabilities [batch * classes] of plan p (forward-only, of net
 * at the plan's batch, the CPU backend be set up) with weights w on input
 * x, the regions poisoned (NaN) when released, so a read of a region after
 * its release shows; fault: a VD_FAULT_*. *st: the executor's own count of
 * the bytes live and the pool's top. */
static int infer_cpu(vd_backend *be, const vd_net *net, const vd_plan *p, const float *w,
                     const float *x, int fault, float *probs, vd_exec_stats *st, vd_err *e) {
    vd_exec_opts eo = {.math = VD_MATH_FP32, .layers_ready = true, .poison = true, .fault = fault};
    vd_exec *ex = NULL;
    int rc = vd_exec_create(&ex, net, p, be, &eo, e);
    if (!rc) rc = vd_exec_set_state(ex, w, NULL, 0, e);
    if (!rc) {
        memcpy(vd_exec_input_x(ex), x, sizeof(float) * (size_t)p->batch *
                                       (size_t)vd_net_out_numel(net, -1));
        memset(vd_exec_input_labels(ex), 0, sizeof(int32_t) * (size_t)p->batch);
        vd_eval_counts counts;
        rc = vd_exec_eval_step(ex, &counts, e);
    }
    if (!rc) {
        vd_exec_eval_probs(ex, probs);
        vd_exec_get_stats(ex, st);
    }
    vd_exec_destroy(&ex);
    return rc;
}

START_TEST(offload_below_split_floor) {
    setup();
    char *d = vdt_tmpdir("vdnn-predict");
    char spec[1100], ck[1100], img[4][1100], imgs[4500], prof_path[1100], msg[160], fb[32];
    snprintf(spec, sizeof spec, "%s/res-offload.yaml", d);
    snprintf(ck, sizeof ck, "%s/res-offload.safetensors", d);
    snprintf(prof_path, sizeof prof_path, "%s/res-offload.profile.json", d);
    tu_write(spec, NET_RES, sizeof NET_RES - 1);
    vd_net net;
    vd_net_init(&net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(spec, &net, &e) == 0, "%s", e.msg);
    const int B = 4;
    float *w = calloc((size_t)net.param_floats, sizeof *w);
    ck_assert(w != NULL);
    vd_net_init_params(&net, w, 11);
    vd_train_state st = {0};
    ck_assert_msg(vd_ckpt_save(ck, &net, w, NULL, &st, &e) == 0, "%s", e.msg);
    /* four 16x16 colour images of different patterns */
    imgs[0] = '\0';
    for (int i = 0; i < B; i++) {
        char buf[32 + 3 * 256];
        int k = snprintf(buf, sizeof buf, "P6\n16 16\n255\n");
        for (int q = 0; q < 3 * 256; q++) buf[k + q] = (char)((q * (5 + i) + 60 * i) % 256);
        snprintf(img[i], sizeof img[i], "%s/im%d.ppm", d, i);
        tu_write(img[i], buf, (size_t)k + 3 * 256);
        strcat(imgs, img[i]);
        strcat(imgs, " ");
    }
    /* planned with the profile the unconstrained run measured (--profile-out) */
    char *full, *out, want[4096], got[4096];
    ck_assert_int_eq(predict(&full, "%s --init %s --backend cpu --batch %d --top-k 5 --format "
                             "jsonl --quiet --profile-out %s %s", spec, ck, B, prof_path, imgs), 0);
    vd_schedule_inplace(&net);
    vd_profile prof;
    ck_assert_msg(vd_profile_load(prof_path, &net, B, &prof, &e) == 0, "%s", e.msg);
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = B;
    o.forward_only = true;
    /* the floors: splitting alone (no_offload), and with offloads */
    uint64_t split_floor = 0, floor_b = 0;
    o.no_offload = true;
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &split_floor, &e) == 0, "%s", e.msg);
    o.no_offload = false;
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &floor_b, &e) == 0, "%s", e.msg);
    ck_assert_uint_lt(floor_b, split_floor);
    vd_plan whole, off;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &whole, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(whole.offload_bytes, 0);
    /* 256 bytes below the split floor: splitting alone does not fit, with
     * offloads it does, within the budget */
    uint64_t tight = split_floor - 256;
    o.budget = tight;
    o.no_offload = true;
    ck_assert_int_eq(vd_plan_build(&net, &prof, &o, &off, &e), VD_EBUDGET);
    vd_plan_free(&off);
    o.no_offload = false;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &off, &e) == 0, "%s", e.msg);
    ck_assert(off.forward_only && off.feasible && off.budget == tight);
    ck_assert_uint_le(off.hwm, tight);
    /* exact bytes: each step's live bytes the sum of the regions live then,
     * every region inside the pool; each offloaded map copied out once and
     * back once, its host slot 256-aligned; an offloaded map absent from its
     * release to its prefetch, both between its two reads; every unit's
     * inputs resident at its step */
    uint64_t host = 0, moved = 0;
    int n_off = 0;
    for (int s = 0; s < off.n_steps; s++) {
        uint64_t live = 0;
        for (int k = 0; k < off.n_intervals; k++) {
            const vd_interval *iv = &off.intervals[k];
            ck_assert_uint_le(iv->offset + iv->bytes, off.hwm);
            if (iv->first <= s && s <= iv->last) live += iv->bytes;
        }
        ck_assert_uint_eq(off.steps[s].mem_in_use, live);
        ck_assert_uint_le(live, tight);
    }
    for (int t = 0; t < off.n_tensors; t++) {
        const vd_tensor *T = &off.tensors[t];
        if (!T->offload) continue;
        n_off++;
        ck_assert_msg(T->kind == VD_T_ACT && !T->host_src && T->n_iv == 2, "%s", T->name);
        const vd_interval *a = &off.intervals[T->iv[0]], *z = &off.intervals[T->iv[1]];
        ck_assert_msg(T->rd_before < T->release_step && a->last == T->release_step - 1 &&
                      T->release_step < T->prefetch_step && z->first == T->prefetch_step &&
                      T->prefetch_step <= T->rd_after && z->need_step == T->rd_after &&
                      z->fill == VD_FILL_HOST_STORE, "%s", T->name);
        ck_assert_uint_eq(T->host_offset, host);
        host += VD_ALIGN_UP(T->bytes, 256u);
        moved += T->bytes;
    }
    ck_assert_int_ge(n_off, 1);
    ck_assert_uint_eq(off.host_bytes, host);
    ck_assert_uint_eq(off.offload_bytes, moved);
    ck_assert_uint_eq(off.prefetch_bytes, moved);
    for (int u = 0; u < off.n_units; u++)
        for (int k = 0; k < net.layers[off.layers[u].layer].n_in; k++)
            ck_assert_msg(vd_plan_resident(&off, off.layers[u].in_t[k], u), "unit %d input %d", u, k);
    /* the floor fits offloading, 256 bytes less does not */
    vd_plan q;
    o.budget = floor_b;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &q, &e) == 0, "%s", e.msg);
    ck_assert_uint_gt(q.offload_bytes, 0);
    vd_plan_free(&q);
    o.budget = floor_b - 256;
    ck_assert_int_eq(vd_plan_build(&net, &prof, &o, &q, &e), VD_EBUDGET);
    vd_plan_free(&q);

    /* the executor: the probabilities bit for bit the unconstrained plan's,
     * its own counts of the live bytes and the pool's top the plan's;
     * skipping the waits on the prefetches reads what the region held
     * before (the CPU backend copies when the copy is waited for) */
    vd_backend *be = NULL;
    ck_assert_msg(vd_backend_cpu_create(&be, &e) == 0, "%s", e.msg);
    ck_assert_msg(be->layer_setup(be, &net, B, VD_MATH_FP32, true, &e) == 0, "%s", e.msg);
    int64_t xn = (int64_t)B * vd_net_out_numel(&net, -1);
    float *x = calloc((size_t)xn, sizeof *x);
    float pw[4 * 5], po[4 * 5], pf[4 * 5];
    ck_assert(x != NULL);
    for (int64_t i = 0; i < xn; i++) x[i] = (float)sin(0.7 * (double)i);
    vd_exec_stats sw, so, sf;
    ck_assert_msg(infer_cpu(be, &net, &whole, w, x, VD_FAULT_NONE, pw, &sw, &e) == 0, "%s", e.msg);
    ck_assert_msg(infer_cpu(be, &net, &off, w, x, VD_FAULT_NONE, po, &so, &e) == 0, "%s", e.msg);
    ck_assert_msg(!memcmp(pw, po, sizeof pw), "the offloading plan changed the probabilities");
    ck_assert_uint_eq(so.eval_live_peak, off.live_peak);
    ck_assert_uint_eq(so.eval_pool_hwm, off.hwm);
    ck_assert_msg(infer_cpu(be, &net, &off, w, x, VD_FAULT_SKIP_PREFETCH_WAIT, pf, &sf, &e) == 0,
                  "%s", e.msg);
    ck_assert_msg(memcmp(pw, pf, sizeof pw) != 0, "without its prefetch waits the offloading "
                  "plan gave the same probabilities: the test would not catch a missing wait");
    be->destroy(be);
    free(x);
    free(w);

    /* vdnn-predict below the split floor: the same probabilities bit for
     * bit (jsonl prints 9 significant digits: a float's round trip), the
     * offloads named; below the floor: exit 6 naming it */
    result_lines(full, want, sizeof want);
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --batch %d --top-k 5 --format "
                             "jsonl --budget %llu %s", spec, ck, B, (unsigned long long)tight,
                             imgs), 0);
    snprintf(msg, sizeof msg, "plan: offloads %d map%s between their readers", n_off,
             n_off == 1 ? "" : "s");
    ck_assert_msg(strstr(out, msg), "%s", out);
    result_lines(out, got, sizeof got);
    ck_assert_str_eq(got, want);
    vd_free(out);
    ck_assert_int_eq(predict(&out, "%s --init %s --backend cpu --batch %d --budget %llu %s", spec,
                             ck, B, (unsigned long long)(floor_b - 256), imgs), 6);
    snprintf(msg, sizeof msg, "the smallest budget that fits is %s (%llu bytes)",
             vd_fmt_bytes(floor_b, fb, sizeof fb), (unsigned long long)floor_b);
    ck_assert_msg(strstr(out, msg) && strstr(out, "maps offloaded between their readers"), "%s",
                  out);
    vd_free(out);
    vd_free(full);
    vd_plan_free(&off);
    vd_plan_free(&whole);
    vd_profile_free(&prof);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* Batch norm splits in an inference plan (its evaluation forward normalises
 * each sample with the running statistics): NET_BN's widest step is its
 * first batch norm, which splitting without it could not shrink (a run of
 * one layer, the conv before it, saves nothing); at the smallest budget it
 * runs in batch chunks, and the probabilities are the whole batch's bit for
 * bit (every layer given one option, so the split plan computes each
 * sample as the whole one does). */
static const char NET_BN[] =
    "name: bn-stem\n"
    "input: { channels: 3, height: 16, width: 16, classes: 5 }\n"
    "layers:\n"
    "  - { name: conv1, type: conv, out: 16, kernel: 3, pad: 1 }\n"
    "  - { name: bn1, type: batchnorm }\n"
    "  - { name: relu1, type: relu }\n"
    "  - { name: pool1, type: pool, mode: max, kernel: 2, stride: 2 }\n"
    "  - { name: conv2, type: conv, out: 8, kernel: 3, pad: 1 }\n"
    "  - { name: bn2, type: batchnorm }\n"
    "  - { name: relu2, type: relu }\n"
    "  - { name: pool, type: pool, mode: avg, global: true }\n"
    "  - { name: fc, type: fc, out: 5 }\n"
    "  - { name: loss, type: softmax_cross_entropy }\n";

/* The two plan tests' fixture: text written to dir/file and loaded as a
 * net (in-place flags set), a CPU backend set up for it at batch B in
 * fp32, that backend's profile with option 0 only (so a chunk computes
 * each sample as the whole batch does), and forward-only plan options at B. */
static void fwd_fixture(const char *dir, const char *file, const char *text, size_t len, int B,
                        vd_net *net, vd_backend **be, vd_profile *prof, vd_plan_opts *o) {
    char spec[1100];
    snprintf(spec, sizeof spec, "%s/%s", dir, file);
    tu_write(spec, text, len);
    vd_net_init(net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(spec, net, &e) == 0, "%s", e.msg);
    vd_schedule_inplace(net);
    *be = NULL;
    ck_assert_msg(vd_backend_cpu_create(be, &e) == 0, "%s", e.msg);
    ck_assert_msg((*be)->layer_setup(*be, net, B, VD_MATH_FP32, true, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_profile_backend(net, B, *be, &vd_device_cpu, prof, &e) == 0, "%s", e.msg);
    for (int i = 0; i < net->n_layers; i++) prof->layers[i].n_algos = 1;
    vd_plan_opts_init(o);
    o->batch = B;
    o->forward_only = true;
}

START_TEST(batchnorm_splits_in_inference) {
    setup();
    char *d = vdt_tmpdir("vdnn-predict");
    const int B = 8;
    vd_net net;
    vd_backend *be;
    vd_profile prof;
    vd_plan_opts o;
    fwd_fixture(d, "bn-stem.yaml", NET_BN, sizeof NET_BN - 1, B, &net, &be, &prof, &o);
    vd_err e = {0};
    vd_plan whole, fl;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &whole, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &o.budget, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &fl, &e) == 0, "%s", e.msg);
    ck_assert_uint_le(fl.hwm, o.budget);
    ck_assert_uint_lt(fl.hwm, whole.hwm);
    int bn_split = 0;
    for (int u = 0; u < fl.n_units; u++)
        bn_split += net.layers[fl.layers[u].layer].op == VD_OP_BATCHNORM && fl.layers[u].n_chunks > 1;
    ck_assert_int_gt(bn_split, 0);
    int64_t xn = (int64_t)B * vd_net_out_numel(&net, -1);
    float *w = calloc((size_t)net.param_floats, sizeof *w), *x = calloc((size_t)xn, sizeof *x);
    float pw[8 * 5], pf[8 * 5];
    ck_assert(w && x);
    vd_net_init_params(&net, w, 3);
    for (int i = 0; i < net.n_params; i++)   /* running statistics away from 0 and 1 */
        if (net.params[i].role == VD_ROLE_RUNNING_MEAN || net.params[i].role == VD_ROLE_RUNNING_VAR)
            for (int64_t k = 0; k < net.params[i].numel; k++)
                w[net.params[i].offset + k] = 0.5f + 0.25f * (float)((k * 7 + i) % 5);
    for (int64_t i = 0; i < xn; i++) x[i] = (float)cos(0.3 * (double)i);
    vd_exec_stats sw, sf;
    ck_assert_msg(infer_cpu(be, &net, &whole, w, x, VD_FAULT_NONE, pw, &sw, &e) == 0, "%s", e.msg);
    ck_assert_msg(infer_cpu(be, &net, &fl, w, x, VD_FAULT_NONE, pf, &sf, &e) == 0, "%s", e.msg);
    ck_assert_msg(!memcmp(pw, pf, sizeof pw), "splitting batch norm changed the probabilities");
    ck_assert_uint_eq(sf.eval_pool_hwm, fl.hwm);
    free(w);
    free(x);
    be->destroy(be);
    vd_plan_free(&fl);
    vd_plan_free(&whole);
    vd_profile_free(&prof);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- an add over its input in inference ------------------------------------- */

/* Two adds whose inputs each have a choice: add1 reads a.relu, which add2
 * reads again (so add1 may not overwrite it), and stem.relu, read by
 * nobody after add1 (taken, though produced earlier); add2 reads three maps
 * that nobody reads after it and overwrites the latest one's, b.conv's
 * (input 1). Every map is 4 channels of 16x16 floats: 4 KiB a sample. */
static const char NET_ADD[] =
    "name: add-inplace\n"
    "input: { channels: 3, height: 16, width: 16, classes: 5 }\n"
    "layers:\n"
    "  - { name: stem, type: conv, out: 4, kernel: 3, pad: 1 }\n"
    "  - { name: stem.relu, type: relu }\n"
    "  - { name: a.conv, type: conv, out: 4, kernel: 3, pad: 1 }\n"
    "  - { name: a.relu, type: relu }\n"
    "  - { name: add1, type: add, inputs: [a.relu, stem.relu] }\n"
    "  - { name: b.conv, type: conv, out: 4, kernel: 1 }\n"
    "  - { name: add2, type: add, inputs: [a.relu, b.conv, add1] }\n"
    "  - { name: relu, type: relu }\n"
    "  - { name: pool, type: pool, mode: avg, global: true }\n"
    "  - { name: fc, type: fc, out: 5 }\n"
    "  - { name: loss, type: softmax_cross_entropy }\n";

/* A forward-only plan's add writes over an input nobody reads after it
 * (plan.h, "A forward-only plan"): the chosen input's tensor is its output
 * (and the in-place ReLU's after add2), each add step holds exactly its
 * input maps, and the CPU executor (regions poisoned when released, add's
 * y one of its x) gives bit for bit the probabilities of a plan that splits
 * every layer but the loss in two batch chunks (a split add writes its own
 * chunk tensor: the reference without any add in place; every layer given
 * one option, so each sample is computed as the whole batch's), whole and
 * at the smallest budget. (A training plan is no reference: its evaluation
 * runs its forward-only plan, vd_plan.eval.) */
START_TEST(add_writes_over_an_input_in_inference) {
    setup();
    char *d = vdt_tmpdir("vdnn-predict");
    const int B = 4;
    const uint64_t map = (uint64_t)B * 4 * 16 * 16 * sizeof(float);
    vd_net net;
    vd_backend *be;
    vd_profile prof;
    vd_plan_opts o;
    fwd_fixture(d, "add-inplace.yaml", NET_ADD, sizeof NET_ADD - 1, B, &net, &be, &prof, &o);
    vd_err e = {0};
    vd_plan split, whole, fl;
    int chunks[11];
    ck_assert_int_eq(net.n_layers, 11);
    ck_assert_msg(vd_plan_chunks_all(&net, B, 2, chunks, &e) == 0, "%s", e.msg);
    o.chunks = chunks;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &split, &e) == 0, "%s", e.msg);
    o.chunks = NULL;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &whole, &e) == 0, "%s", e.msg);
    int add1 = vd_net_find(&net, "add1"), add2 = vd_net_find(&net, "add2");
    int relu = vd_net_find(&net, "relu");
    ck_assert(add1 >= 0 && add2 >= 0 && relu >= 0);
    const vd_plan_layer *p1 = &whole.layers[whole.first_unit[add1]];
    const vd_plan_layer *p2 = &whole.layers[whole.first_unit[add2]];
    const vd_plan_layer *pr = &whole.layers[whole.first_unit[relu]];
    ck_assert(whole.n_units == net.n_layers);   /* nothing split: unit = step = layer */
    ck_assert(p1->inplace && p1->y == p1->in_t[1] && p1->y != p1->in_t[0]);
    ck_assert(p2->inplace && p2->y == p2->in_t[1] && p2->y != p2->in_t[0] && p2->y != p2->in_t[2]);
    ck_assert(pr->inplace && pr->y == p2->y);
    /* add1's step: the persistent tensors (parameters), a.relu and
     * stem.relu's tensor (add1's output); add2's: a.relu, b.conv's tensor
     * (add2's output) and add1's (no fourth) */
    uint64_t persist = 0;
    for (int k = 0; k < whole.n_intervals; k++)
        if (whole.tensors[whole.intervals[k].tensor].persistent) persist += whole.intervals[k].bytes;
    ck_assert_uint_eq(whole.steps[add1].mem_in_use, persist + 2 * map);
    ck_assert_uint_eq(whole.steps[add2].mem_in_use, persist + 3 * map);
    /* the split plan keeps every add's output apart */
    for (int u = 0; u < split.n_units; u++) {
        const vd_plan_layer *q = &split.layers[u];
        if (q->layer != add1 && q->layer != add2) continue;
        ck_assert_int_eq(q->n_chunks, 2);
        for (int k = 0; k < net.layers[q->layer].n_in; k++) ck_assert(!q->inplace && q->y != q->in_t[k]);
    }
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &o.budget, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &fl, &e) == 0, "%s", e.msg);
    ck_assert_uint_le(fl.hwm, o.budget);
    int64_t xn = (int64_t)B * vd_net_out_numel(&net, -1);
    float *w = calloc((size_t)net.param_floats, sizeof *w), *x = calloc((size_t)xn, sizeof *x);
    float pt[4 * 5], pw[4 * 5], pf[4 * 5];
    ck_assert(w && x);
    vd_net_init_params(&net, w, 5);
    for (int64_t i = 0; i < xn; i++) x[i] = (float)sin(0.37 * (double)i);
    vd_exec_stats st, sw, sf;
    ck_assert_msg(infer_cpu(be, &net, &split, w, x, VD_FAULT_NONE, pt, &st, &e) == 0, "%s", e.msg);
    ck_assert_msg(infer_cpu(be, &net, &whole, w, x, VD_FAULT_NONE, pw, &sw, &e) == 0, "%s", e.msg);
    ck_assert_msg(infer_cpu(be, &net, &fl, w, x, VD_FAULT_NONE, pf, &sf, &e) == 0, "%s", e.msg);
    ck_assert_msg(!memcmp(pt, pw, sizeof pt), "the adds in place changed the probabilities");
    ck_assert_msg(!memcmp(pt, pf, sizeof pt), "the smallest budget changed the probabilities");
    ck_assert_uint_eq(sw.eval_live_peak, whole.live_peak);
    ck_assert_uint_eq(sf.eval_pool_hwm, fl.hwm);
    free(w);
    free(x);
    be->destroy(be);
    vd_plan_free(&fl);
    vd_plan_free(&whole);
    vd_plan_free(&split);
    vd_profile_free(&prof);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

VDT_MAIN("predict", 0, inference_plan_frees_after_last_reader, topk_order_and_ties,
         probabilities_match_closed_form,
         class_names_round_trip, bad_images_among_good_ones, data_split_padded_and_scored,
         usage_and_budget_errors, small_budget_splits_layers, offload_below_split_floor,
         batchnorm_splits_in_inference, add_writes_over_an_input_in_inference)
