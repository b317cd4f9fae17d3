/* test_spec.c — the YAML spec parser, the reference nets and the summary.
 *
 * - every file in tests/spec/bad/ fails with exactly the message on its
 *   "# expect:" line (FILE stands for the file's path) and the VD_ESPEC code
 *   (or the code on an "# expect-code:" line);
 * - the reference nets have torchvision's exact trainable parameter counts
 *   (published numbers, independent of this code) and torchvision's names;
 * - templates, expressions, repeat/if and defaults behave as documented in
 *   man/vdnn-net.5;
 * - the JSON summary is valid JSON with the documented keys;
 * - hostile input (the fuzz corpus, random mutations) never crashes. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "spec/spec.h"
#include "spec/summary.h"
#include "vdt.h"

static char g_bad[256][512];  /* paths of tests/spec/bad/ *.yaml, sorted */
static int g_n_bad;

static const char *srcdir(void) {
    const char *s = getenv("VD_SRCDIR");
    return s ? s : ".";
}

static void path_of(char *buf, size_t n, const char *rel) { snprintf(buf, n, "%s/%s", srcdir(), rel); }

/* Parse a spec given as a string; returns the code, fills net and e. */
static int parse(const char *text, vd_net *net, vd_err *e) {
    vd_net_init(net);
    memset(e, 0, sizeof *e);
    return vd_spec_parse(text, strlen(text), "t.yaml", net, e);
}

static void load_ok(const char *rel, vd_net *net) {
    char p[512];
    path_of(p, sizeof p, rel);
    vd_err e = {0};
    vd_net_init(net);
    int rc = vd_spec_load(p, net, &e);
    ck_assert_msg(rc == 0, "%s: %s", rel, e.msg);
}

static const vd_param *find_param(const vd_net *net, const char *name) {
    for (int i = 0; i < net->n_params; i++)
        if (!strcmp(net->params[i].name, name)) return &net->params[i];
    return NULL;
}

static void check_shape(const vd_net *net, const char *name, int ndim, int64_t a, int64_t b, int64_t c,
                        int64_t d) {
    const vd_param *p = find_param(net, name);
    ck_assert_msg(p != NULL, "%s: no parameter %s", net->name, name);
    int64_t want[4] = {a, b, c, d};
    ck_assert_int_eq(p->ndim, ndim);
    for (int i = 0; i < ndim; i++) ck_assert_msg(p->shape[i] == want[i], "%s dim %d: %lld != %lld", name, i,
                                                 (long long)p->shape[i], (long long)want[i]);
}

static int count_weights(const vd_net *net) {
    int n = 0;
    for (int i = 0; i < net->n_params; i++) n += net->params[i].kind == VD_PARAM_WEIGHT;
    return n;
}

static int count_op(const vd_net *net, vd_op op) {
    int n = 0;
    for (int i = 0; i < net->n_layers; i++) n += net->layers[i].op == op;
    return n;
}

static const vd_layer *layer(const vd_net *net, const char *name) {
    int i = vd_net_find(net, name);
    ck_assert_msg(i >= 0, "no layer %s", name);
    return &net->layers[i];
}

/* ---- bad specs ---------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(a, b); }

static void scan_bad(void) {
    char dir[512];
    path_of(dir, sizeof dir, "tests/spec/bad");
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) && g_n_bad < (int)(sizeof g_bad / sizeof g_bad[0])) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".yaml"))
            snprintf(g_bad[g_n_bad++], sizeof g_bad[0], "%s/%s", dir, de->d_name);
    }
    closedir(d);
    qsort(g_bad, (size_t)g_n_bad, sizeof g_bad[0], cmp_str);
}

/* replace every "FILE" in tmpl by path */
static void expand_file(const char *tmpl, const char *path, char *out, size_t n) {
    size_t o = 0;
    for (const char *p = tmpl; *p && o + 1 < n;) {
        if (!strncmp(p, "FILE", 4)) {
            o += (size_t)snprintf(out + o, n - o, "%s", path);
            if (o >= n) o = n - 1;
            p += 4;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = 0;
}

START_TEST(test_bad_spec) {
    const char *path = g_bad[_i];
    char *text;
    size_t n;
    vd_err e = {0};
    ck_assert_int_eq(vd_read_file(path, &text, &n, &e), 0);
    int want_code = VD_ESPEC;
    char expect[1024] = "";
    for (char *line = text; line && *line == '#';) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (!strncmp(line, "# expect: ", 10))
            snprintf(expect, sizeof expect, "%.*s", (int)(len - 10), line + 10);
        else if (!strncmp(line, "# expect-code: ", 15))
            want_code = atoi(line + 15);
        line = nl ? nl + 1 : NULL;
    }
    vd_free(text);
    ck_assert_msg(expect[0], "%s has no '# expect:' line", path);
    char want[2048];
    expand_file(expect, path, want, sizeof want);
    vd_net net;
    vd_net_init(&net);
    memset(&e, 0, sizeof e);
    int rc = vd_spec_load(path, &net, &e);
    ck_assert_msg(rc == want_code, "%s: code %d, want %d (%s)", path, rc, want_code, e.msg);
    ck_assert_int_eq(e.code, want_code);
    /* vd_err holds 1023 characters; compare what fits */
    ck_assert_msg(!strncmp(e.msg, want, sizeof e.msg - 1), "%s:\n got: %s\nwant: %s", path, e.msg, want);
    vd_net_free(&net);
}
END_TEST

/* ---- reference nets ----------------------------------------------------- */

START_TEST(test_torchvision_counts) {
    static const struct { const char *file; int64_t params; } nets[] = {
        {"nets/alexnet.yaml", 61100840},      /* torchvision.models.alexnet */
        {"nets/vgg16.yaml", 138357544},       /* torchvision.models.vgg16 */
        {"nets/resnet50.yaml", 25557032},     /* torchvision.models.resnet50 */
        {"nets/resnet152.yaml", 60192808},    /* torchvision.models.resnet152 */
        {"nets/googlenet.yaml", 6624904},     /* torchvision googlenet, aux_logits=False */
        {"nets/lenet.yaml", 61706},           /* LeNet-5: 156+2416+48120+10164+850 */
        {"nets/alexnet-lrn.yaml", 60965224},  /* Caffe bvlc_alexnet */
        {"nets/examples/resnet18.yaml", 11689512},  /* torchvision.models.resnet18 */
        {"nets/examples/cifar10-quick.yaml", 145578}, /* Caffe cifar10_quick */
    };
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        vd_net net;
        load_ok(nets[i].file, &net);
        ck_assert_msg(net.n_trainable == nets[i].params, "%s: %lld trainable, want %lld", nets[i].file,
                      (long long)net.n_trainable, (long long)nets[i].params);
        /* finalize is idempotent */
        vd_err e = {0};
        ck_assert_int_eq(vd_net_finalize(&net, &e), 0);
        ck_assert_int_eq(net.n_trainable, nets[i].params);
        vd_net_free(&net);
    }
}
END_TEST

START_TEST(test_resnet50_names) {
    vd_net net;
    load_ok("nets/resnet50.yaml", &net);
    ck_assert_str_eq(net.name, "resnet50");
    ck_assert_int_eq(net.train.batch, 256);
    check_shape(&net, "conv1.weight", 4, 64, 3, 7, 7);
    check_shape(&net, "layer1.0.downsample.0.weight", 4, 256, 64, 1, 1);
    check_shape(&net, "layer1.0.downsample.1.running_var", 1, 256, 0, 0, 0);
    check_shape(&net, "layer2.0.conv2.weight", 4, 128, 128, 3, 3);
    check_shape(&net, "layer4.2.conv3.weight", 4, 2048, 512, 1, 1);
    check_shape(&net, "layer4.2.bn3.bias", 1, 2048, 0, 0, 0);
    check_shape(&net, "fc.weight", 2, 1000, 2048, 0, 0);
    ck_assert_ptr_null(find_param(&net, "layer1.1.downsample.0.weight"));
    ck_assert_ptr_null(find_param(&net, "layer1.0.conv1.bias"));
    ck_assert_int_eq(count_weights(&net), 161);   /* len(list(resnet50().parameters())) */
    ck_assert_int_eq(count_op(&net, VD_OP_BATCHNORM), 53);
    ck_assert_int_eq(count_op(&net, VD_OP_CONV), 53);
    ck_assert_int_eq(count_op(&net, VD_OP_ADD), 16);
    /* v1.5: stride on the 3x3 conv; stage outputs */
    ck_assert_int_eq(layer(&net, "layer2.0.conv2")->u.conv.sh, 2);
    ck_assert_int_eq(layer(&net, "layer2.0.conv1")->u.conv.sh, 1);
    ck_assert_int_eq(layer(&net, "layer2.1.conv2")->u.conv.sh, 1);
    const vd_layer *l = layer(&net, "layer3.5.relu");
    ck_assert_int_eq(l->c, 1024); ck_assert_int_eq(l->h, 14); ck_assert_int_eq(l->w, 14);
    l = layer(&net, "layer1.1.add");
    ck_assert_int_eq(l->n_in, 2);
    ck_assert_str_eq(net.layers[l->in[0]].name, "layer1.1.bn3");
    ck_assert_str_eq(net.layers[l->in[1]].name, "layer1.0.relu");
    l = layer(&net, "layer2.0.downsample.0");
    ck_assert_str_eq(net.layers[l->in[0]].name, "layer1.2.relu");
    l = layer(&net, "avgpool");
    ck_assert_int_eq(l->c, 2048); ck_assert_int_eq(l->h, 1);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_googlenet_names) {
    vd_net net;
    load_ok("nets/googlenet.yaml", &net);
    check_shape(&net, "conv1.conv.weight", 4, 64, 3, 7, 7);
    check_shape(&net, "conv3.bn.running_mean", 1, 192, 0, 0, 0);
    check_shape(&net, "inception3a.branch1.conv.weight", 4, 64, 192, 1, 1);
    check_shape(&net, "inception3a.branch3.1.conv.weight", 4, 32, 16, 3, 3); /* torchvision: 3x3 */
    check_shape(&net, "inception4e.branch2.1.bn.weight", 1, 320, 0, 0, 0);
    check_shape(&net, "inception5b.branch4.1.conv.weight", 4, 128, 832, 1, 1);
    check_shape(&net, "fc.weight", 2, 1000, 1024, 0, 0);
    ck_assert_ptr_null(find_param(&net, "conv1.conv.bias"));
    ck_assert_int_eq(count_weights(&net), 173);   /* 57 BasicConv2d x 3 + fc x 2 */
    ck_assert_float_eq(layer(&net, "inception4a.branch1.bn")->u.bn.eps, 0.001f);
    const vd_layer *l = layer(&net, "inception4e.concat");
    ck_assert_int_eq(l->c, 832); ck_assert_int_eq(l->h, 14);
    l = layer(&net, "inception5b.concat");
    ck_assert_int_eq(l->c, 1024); ck_assert_int_eq(l->h, 7);
    ck_assert_int_eq(layer(&net, "maxpool1")->h, 56);   /* ceil_mode */
    ck_assert_int_eq(layer(&net, "maxpool4")->h, 7);
    l = layer(&net, "inception3b.branch2.0.conv");     /* the block input, not the previous layer */
    ck_assert_str_eq(net.layers[l->in[0]].name, "inception3a.concat");
    vd_net_free(&net);
}
END_TEST

START_TEST(test_classic_names) {
    vd_net net;
    load_ok("nets/vgg16.yaml", &net);
    check_shape(&net, "features.0.weight", 4, 64, 3, 3, 3);
    check_shape(&net, "features.28.weight", 4, 512, 512, 3, 3);
    check_shape(&net, "classifier.0.weight", 2, 4096, 25088, 0, 0);
    check_shape(&net, "classifier.6.bias", 1, 1000, 0, 0, 0);
    ck_assert_int_eq(count_op(&net, VD_OP_CONV), 13);
    ck_assert_int_eq(net.train.batch, 256);
    vd_net_free(&net);
    load_ok("nets/alexnet.yaml", &net);
    check_shape(&net, "features.10.weight", 4, 256, 256, 3, 3);
    check_shape(&net, "classifier.1.weight", 2, 4096, 9216, 0, 0);
    ck_assert_int_eq(layer(&net, "avgpool")->u.pool.out_h, 6);
    vd_net_free(&net);
    load_ok("nets/lenet.yaml", &net);
    ck_assert_int_eq(net.in_c, 1); ck_assert_int_eq(net.in_h, 28); ck_assert_int_eq(net.classes, 10);
    check_shape(&net, "fc1.weight", 2, 120, 400, 0, 0);
    vd_net_free(&net);
    load_ok("nets/alexnet-lrn.yaml", &net);
    check_shape(&net, "conv2.weight", 4, 256, 48, 5, 5);   /* groups: 2 */
    const vd_layer *l = layer(&net, "norm1");
    ck_assert_int_eq(l->u.lrn.size, 5);
    ck_assert_float_eq(l->u.lrn.k, 2.0f);
    vd_net_free(&net);
    load_ok("nets/tiny-resnet.yaml", &net);
    ck_assert_int_eq(count_op(&net, VD_OP_ADD), 3);
    ck_assert_int_eq(count_op(&net, VD_OP_BATCHNORM), 8);
    ck_assert_ptr_nonnull(find_param(&net, "layer2.0.downsample.0.weight"));
    vd_net_free(&net);
    load_ok("nets/tiny-inception.yaml", &net);
    ck_assert_int_eq(count_op(&net, VD_OP_CONCAT), 2);
    ck_assert_int_eq(layer(&net, "block2.concat")->c, 24);
    vd_net_free(&net);
}
END_TEST

/* ---- templates, expressions, defaults ---------------------------------- */

/* Floats below are compared exactly (tolerance 0): the parser converts the
 * same decimal text the test writes, so the values must be bit-identical. */
#define HDR "input: { channels: 2, height: 8, width: 8, classes: 4 }\n"
#define TAIL "  - { name: fc, type: fc, out: 4 }\n  - { name: loss, type: softmax_cross_entropy }\n"

START_TEST(test_defaults) {
    vd_net net;
    vd_err e;
    ck_assert_int_eq(parse(HDR "layers:\n"
                           "  - { name: c, type: conv, out: 4, kernel: 3 }\n"
                           "  - { name: p, type: pool, mode: max, kernel: [2, 4] }\n"
                           "  - { name: b, type: batchnorm }\n"
                           "  - { name: n, type: lrn }\n"
                           "  - { name: d, type: dropout }\n" TAIL, &net, &e), 0);
    ck_assert_str_eq(net.name, "t");            /* from the file name */
    ck_assert_str_eq(net.path, "t.yaml");
    const vd_layer *l = layer(&net, "c");
    ck_assert_int_eq(l->line, 3); ck_assert_int_eq(l->col, 5);
    ck_assert_int_eq(l->n_in, 1); ck_assert_int_eq(l->in[0], -1);
    ck_assert_int_eq(l->u.conv.sh, 1); ck_assert_int_eq(l->u.conv.sw, 1);
    ck_assert_int_eq(l->u.conv.ph, 0); ck_assert_int_eq(l->u.conv.dh, 1);
    ck_assert_int_eq(l->u.conv.groups, 1); ck_assert(l->u.conv.bias);
    l = layer(&net, "p");
    ck_assert_int_eq(l->in[0], 0);
    ck_assert_int_eq(l->u.pool.sh, 2); ck_assert_int_eq(l->u.pool.sw, 4);  /* stride = kernel */
    ck_assert_int_eq(l->h, 3); ck_assert_int_eq(l->w, 1);
    ck_assert(!l->u.pool.ceil_mode && !l->u.pool.global);
    l = layer(&net, "b");
    ck_assert_float_eq(l->u.bn.eps, 1e-5f); ck_assert_float_eq(l->u.bn.momentum, 0.1f);
    l = layer(&net, "n");
    ck_assert_int_eq(l->u.lrn.size, 5);
    ck_assert_float_eq(l->u.lrn.alpha, 1e-4f); ck_assert_float_eq(l->u.lrn.beta, 0.75f);
    ck_assert_float_eq(l->u.lrn.k, 2.0f);
    ck_assert_float_eq(layer(&net, "d")->u.dropout.p, 0.5f);
    const vd_train_cfg *t = &net.train;
    ck_assert_int_eq(t->batch, 32);
    ck_assert_float_eq(t->lr, 0.01f); ck_assert_float_eq(t->momentum, 0.9f);
    ck_assert_float_eq(t->weight_decay, 0.0005f);
    ck_assert_int_eq(t->lr_policy.type, VD_LR_FIXED);
    ck_assert_int_eq(t->iters, 0); ck_assert_int_eq(t->epochs, 1);
    ck_assert_int_eq(t->seed, 1);
    vd_net_free(&net);
}
END_TEST

/* The data: section: normalize's mean and std, a list per channel or one
 * number for all; not given: n 0 (each data set's own). Bad values:
 * tests/spec/bad/data-*.yaml. */
START_TEST(test_data_section) {
    vd_net net;
    vd_err e;
    ck_assert_int_eq(parse(HDR "layers:\n" TAIL, &net, &e), 0);
    ck_assert_int_eq(net.norm.n, 0);
    vd_net_free(&net);
    ck_assert_msg(parse(HDR "data: { normalize: { mean: [0.5, -0.25], std: [2, 0.125] } }\n"
                        "layers:\n" TAIL, &net, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(net.norm.n, 2);
    ck_assert_float_eq(net.norm.mean[0], 0.5f); ck_assert_float_eq(net.norm.mean[1], -0.25f);
    ck_assert_float_eq(net.norm.std[0], 2.0f); ck_assert_float_eq(net.norm.std[1], 0.125f);
    vd_net_free(&net);
    ck_assert_msg(parse(HDR "data:\n  normalize:\n    mean: 0.5\n    std: [0.25]\nlayers:\n" TAIL,
                        &net, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(net.norm.n, 2);
    for (int c = 0; c < 2; c++) {
        ck_assert_float_eq(net.norm.mean[c], 0.5f);
        ck_assert_float_eq(net.norm.std[c], 0.25f);
    }
    vd_net_free(&net);
}
END_TEST

START_TEST(test_train_section) {
    vd_net net;
    vd_err e;
    ck_assert_int_eq(parse(HDR "train:\n  batch: 7\n  lr: 0.5\n  momentum: 0\n  weight_decay: 0\n"
                           "  lr_policy: { type: multistep, milestones: [10, 20, 30], gamma: 0.5, warmup: 3 }\n"
                           "  iters: 99\n  seed: 12345678901\n"
                           "layers:\n" TAIL, &net, &e), 0);
    const vd_train_cfg *t = &net.train;
    ck_assert_int_eq(t->batch, 7);
    ck_assert_float_eq(t->lr, 0.5f); ck_assert_float_eq(t->momentum, 0);
    ck_assert_int_eq(t->lr_policy.type, VD_LR_MULTISTEP);
    ck_assert_int_eq(t->lr_policy.n_milestones, 3);
    ck_assert_int_eq(t->lr_policy.milestones[2], 30);
    ck_assert_float_eq(t->lr_policy.gamma, 0.5f);
    ck_assert_int_eq(t->lr_policy.warmup, 3);
    ck_assert_int_eq(t->iters, 99); ck_assert_int_eq(t->epochs, 0);
    ck_assert_uint_eq(t->seed, 12345678901ull);
    ck_assert_int_eq(t->math, VD_MATH_FP32);   /* not given: fp32, and --math decides */
    ck_assert(!t->has_math);
    vd_net_free(&net);
    /* train.math: each mode by name (a bad one: tests/spec/bad/train-math*.yaml) */
    static const struct { const char *name; vd_math m; } maths[] = {
        {"bf16", VD_MATH_BF16}, {"tf32", VD_MATH_TF32}, {"fp32", VD_MATH_FP32}};
    for (size_t k = 0; k < VD_ARRAY_LEN(maths); k++) {
        char text[512];
        snprintf(text, sizeof text, HDR "train: { batch: 4, math: %s }\nlayers:\n" TAIL, maths[k].name);
        ck_assert_msg(parse(text, &net, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(net.train.math, maths[k].m);
        ck_assert(net.train.has_math);
        ck_assert_str_eq(vd_math_name(net.train.math), maths[k].name);
        vd_net_free(&net);
    }
    ck_assert_int_eq(parse(HDR "train: { lr_policy: cosine, epochs: 3 }\nlayers:\n" TAIL, &net, &e), 0);
    ck_assert_int_eq(net.train.lr_policy.type, VD_LR_COSINE);
    ck_assert_int_eq(net.train.epochs, 3);
    vd_net_free(&net);
    ck_assert_int_eq(parse(HDR "train: { lr_policy: { type: poly, power: 2 } }\nlayers:\n" TAIL, &net, &e), 0);
    ck_assert_int_eq(net.train.lr_policy.type, VD_LR_POLY);
    ck_assert_float_eq(net.train.lr_policy.power, 2.0f);
    vd_net_free(&net);
    ck_assert_int_eq(parse(HDR "train: { lr: 0.1, lr_policy: { type: cosine, min_lr: 0.001 } }\nlayers:\n" TAIL,
                           &net, &e), 0);
    ck_assert_float_eq(net.train.lr_policy.min_lr, 0.001f);
    vd_net_free(&net);
    ck_assert_int_eq(parse(HDR "train: { lr_policy: { type: step, step: 5 } }\nlayers:\n" TAIL, &net, &e), 0);
    ck_assert_int_eq(net.train.lr_policy.step, 5);
    ck_assert_float_eq(net.train.lr_policy.gamma, 0.1f);   /* default */
    vd_net_free(&net);
    /* the optimizer: sgd by default with vdnn's lr / weight decay, momentum
     * 0.9, no Nesterov; AdamW with torch.optim.AdamW's defaults (lr 0.001,
     * weight decay 0.01, betas 0.9 / 0.999, eps 1e-8) where the spec gives
     * none, its own where it does (bad ones: tests/spec/bad/train-*.yaml) */
    ck_assert_int_eq(parse(HDR "train: { batch: 4 }\nlayers:\n" TAIL, &net, &e), 0);
    t = &net.train;
    ck_assert(t->optimizer == VD_OPT_SGD && !t->nesterov && t->momentum == 0.9f &&
              t->lr == 0.01f && t->weight_decay == 0.0005f && !t->has_lr && !t->has_weight_decay);
    vd_net_free(&net);
    ck_assert_int_eq(parse(HDR "train: { momentum: 0.5, nesterov: true }\nlayers:\n" TAIL, &net, &e), 0);
    ck_assert(t->optimizer == VD_OPT_SGD && t->nesterov && t->momentum == 0.5f);
    vd_net_free(&net);
    ck_assert_int_eq(parse(HDR "train: { optimizer: adamw }\nlayers:\n" TAIL, &net, &e), 0);
    ck_assert(t->optimizer == VD_OPT_ADAMW && t->lr == 0.001f && t->weight_decay == 0.01f &&
              t->beta1 == 0.9f && t->beta2 == 0.999f && t->eps == 1e-8f);
    ck_assert_str_eq(vd_optimizer_name(t->optimizer), "adamw");
    vd_net_free(&net);
    ck_assert_int_eq(parse(HDR "train: { optimizer: adamw, lr: 0.02, weight_decay: 0, betas: [0.5, 0.75],\n"
                           "         eps: 1e-6, lr_policy: { type: cosine, min_lr: 0.005 } }\n"
                           "layers:\n" TAIL, &net, &e), 0);
    ck_assert(t->lr == 0.02f && t->weight_decay == 0 && t->beta1 == 0.5f && t->beta2 == 0.75f &&
              t->eps == 1e-6f && t->has_lr && t->has_weight_decay);
    vd_net_free(&net);
    /* min_lr is checked against AdamW's default lr: 0.005 > 0.001 */
    ck_assert_int_eq(parse(HDR "train: { optimizer: adamw, lr_policy: { type: cosine, min_lr: 0.005 } }\n"
                           "layers:\n" TAIL, &net, &e), VD_ESPEC);
    ck_assert_msg(strstr(e.msg, "must not exceed 'lr' (0.001)"), "%s", e.msg);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_expressions) {
    static const struct { const char *expr; int want; } cases[] = {
        {"${1 + 2 * 3}", 7},        {"${(1 + 2) * 3}", 9},     {"${17 / 5}", 3},
        {"${17 % 5}", 2},           {"${-3 + 10}", 7},         {"${2 < 3}", 1},
        {"${(3 <= 2) + 5}", 5},           {"${2 == 2 && 3 != 4}", 1}, {"${0 || 5 > 4}", 1},
        {"${0 ? 1 : 2}", 2},        {"${1 ? 0 ? 7 : 8 : 9}", 8}, {"${!0 + !5}", 1},
        {"${0 && 1 / 0 == 1 ? 9 : 3}", 3}, /* dead branches do not divide */
        {"${true + true}", 2},      {"4${1}", 41},             {"${2}${3}", 23},
        {"${ 64 * 4 }", 256},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, HDR "layers:\n  - { name: f0, type: fc, out: \"%s\" }\n" TAIL, cases[i].expr);
        vd_net net;
        vd_err e;
        ck_assert_msg(parse(text, &net, &e) == 0, "%s: %s", cases[i].expr, e.msg);
        ck_assert_msg(layer(&net, "f0")->u.fc.out == cases[i].want, "%s = %d, want %d", cases[i].expr,
                      layer(&net, "f0")->u.fc.out, cases[i].want);
        vd_net_free(&net);
    }
}
END_TEST

START_TEST(test_templates) {
    const char *text =
        HDR
        "templates:\n"                                                     /* 2 */
        "  unit:\n"                                                        /* 3 */
        "    params: { out: ~, k: 1, relu: true }\n"                       /* 4 */
        "    layers:\n"                                                    /* 5 */
        "      - { name: conv, type: conv, out: \"${out}\", kernel: \"${k}\", pad: \"${k / 2}\" }\n" /* 6 */
        "      - { name: relu, type: relu, if: relu }\n"                   /* 7 */
        "  block:\n"                                                       /* 8 */
        "    params: [width]\n"                                            /* 9 */
        "    layers:\n"                                                    /* 10 */
        "      - { use: unit, name: \"u${j}\", repeat: 3, index: j,\n"     /* 11 */
        "          with: { out: \"${width * (j + 1)}\", k: \"${j == 1 ? 3 : 1}\", relu: \"${j != 2}\" } }\n"
        "      - { name: side, type: conv, inputs: \"${input}\", out: \"${width * 3}\", kernel: 1 }\n" /* 13 */
        "      - { name: sum, type: add, inputs: [u2, side] }\n"          /* 14 */
        "      - { name: who, type: relu, inputs: [\"${name}.sum\"] }\n"  /* 15 */
        "layers:\n"                                                        /* 16 */
        "  - { name: stem, type: conv, out: 4, kernel: 1 }\n"              /* 17 */
        "  - { use: block, name: b, with: { width: 2 } }\n"                /* 18 */
        "  - { name: again, type: conv, inputs: [b, data], out: 6, kernel: 1, if: 0 }\n" /* 19 */
        "  - { name: \"r${i}\", type: relu, repeat: 2, inputs: [b] }\n"    /* 20 */
        "  - { name: cat, type: concat, inputs: [r0, r1] }\n"              /* 21 */
        TAIL;
    vd_net net;
    vd_err e;
    ck_assert_msg(parse(text, &net, &e) == 0, "%s", e.msg);
    static const char *const order[] = {"stem", "b.u0.conv", "b.u0.relu", "b.u1.conv", "b.u1.relu",
                                        "b.u2.conv", "b.side", "b.sum", "b.who", "r0", "r1", "cat", "fc", "loss"};
    ck_assert_int_eq(net.n_layers, (int)(sizeof order / sizeof order[0]));
    for (int i = 0; i < net.n_layers; i++) ck_assert_str_eq(net.layers[i].name, order[i]);
    ck_assert_int_eq(layer(&net, "b.u0.conv")->u.conv.out, 2);
    ck_assert_int_eq(layer(&net, "b.u1.conv")->u.conv.out, 4);
    ck_assert_int_eq(layer(&net, "b.u1.conv")->u.conv.kh, 3);
    ck_assert_int_eq(layer(&net, "b.u1.conv")->u.conv.ph, 1);
    ck_assert_int_eq(layer(&net, "b.u2.conv")->u.conv.out, 6);
    /* expanded layers carry the template line; default input chains */
    ck_assert_int_eq(layer(&net, "b.u1.conv")->line, 6);
    ck_assert_int_eq(layer(&net, "b.u1.conv")->col, 9);
    ck_assert_int_eq(layer(&net, "b.side")->line, 13);
    ck_assert_int_eq(layer(&net, "stem")->line, 17);
    const vd_layer *l = layer(&net, "b.u0.conv");
    ck_assert_str_eq(net.layers[l->in[0]].name, "stem");     /* block input */
    l = layer(&net, "b.u1.conv");
    ck_assert_str_eq(net.layers[l->in[0]].name, "b.u0.relu");
    l = layer(&net, "b.side");
    ck_assert_str_eq(net.layers[l->in[0]].name, "stem");     /* ${input} */
    l = layer(&net, "b.who");
    ck_assert_str_eq(net.layers[l->in[0]].name, "b.sum");    /* ${name}.sum, absolute */
    l = layer(&net, "r1");
    ck_assert_str_eq(net.layers[l->in[0]].name, "b.who");    /* a use's name = its last layer */
    ck_assert_int_eq(layer(&net, "cat")->c, 12);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_misc_accepts) {
    vd_net net;
    vd_err e;
    /* anchors/aliases, quoted numbers, pairs, adaptive pool, explicit input by name */
    ck_assert_msg(parse(HDR "name: x\ndescription: |\n  two\n  lines\nlayers:\n"
                        "  - &c { name: c, type: conv, out: \"4\", kernel: [3, 1], stride: [1, 2], pad: [1, 0],"
                        " dilation: 1, groups: 2, bias: false }\n"
                        "  - { name: a, type: pool, mode: avg, output: [2, 3] }\n"
                        "  - { name: g, type: pool, mode: avg, global: false, kernel: 1, ceil_mode: true }\n"
                        "  - { name: fl, type: flatten }\n" TAIL, &net, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(net.name, "x");
    const vd_layer *l = layer(&net, "c");
    ck_assert_int_eq(l->h, 8); ck_assert_int_eq(l->w, 4);
    ck_assert(!l->u.conv.bias);
    ck_assert_ptr_null(find_param(&net, "c.bias"));
    l = layer(&net, "a");
    ck_assert_int_eq(l->h, 2); ck_assert_int_eq(l->w, 3);
    ck_assert_int_eq(layer(&net, "fl")->c, 24);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_load_errors) {
    vd_net net;
    vd_err e = {0};
    vd_net_init(&net);
    ck_assert_int_eq(vd_spec_load("/nonexistent/net.yaml", &net, &e), VD_EIO);
    vd_net_free(&net);
    /* text with embedded NUL bytes and without a terminator */
    static const char junk[] = {'i', 'n', 0, ':', '\n', 'x'};
    vd_net_init(&net);
    ck_assert_int_eq(vd_spec_parse(junk, sizeof junk, NULL, &net, &e), VD_ESPEC);
    ck_assert_msg(!strncmp(e.msg, "<spec>:", 7), "%s", e.msg);
    vd_net_free(&net);
}
END_TEST

/* ---- summary ------------------------------------------------------------ */

/* Minimal JSON validator (RFC 8259 grammar; no semantic checks). */
static const char *js_ws(const char *p) { while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++; return p; }
static const char *js_value(const char *p, int depth);
static const char *js_string(const char *p) {
    if (*p++ != '"') return NULL;
    while (*p && *p != '"') {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') { for (int i = 1; i <= 4; i++) if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL; p += 4; }
            else if (!*p || !strchr("\"\\/bfnrt", *p)) return NULL;
        }
        p++;
    }
    return *p == '"' ? p + 1 : NULL;
}
static const char *js_number(const char *p) {
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return NULL;
    if (*p == '.') { p++; if (!(*p >= '0' && *p <= '9')) return NULL; while (*p >= '0' && *p <= '9') p++; }
    if (*p == 'e' || *p == 'E') { p++; if (*p == '+' || *p == '-') p++; if (!(*p >= '0' && *p <= '9')) return NULL; while (*p >= '0' && *p <= '9') p++; }
    return p;
}
static const char *js_value(const char *p, int depth) {
    if (depth > 64) return NULL;
    p = js_ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        bool obj = *p == '{';
        p = js_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                p = js_string(js_ws(p));
                if (!p) return NULL;
                p = js_ws(p);
                if (*p++ != ':') return NULL;
            }
            p = js_value(p, depth + 1);
            if (!p) return NULL;
            p = js_ws(p);
            if (*p == ',') { p++; continue; }
            return *p == close ? p + 1 : NULL;
        }
    }
    if (*p == '"') return js_string(p);
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    return js_number(p);
}

static char *summary(const vd_net *net, int batch, bool json) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    vd_err e = {0};
    ck_assert_msg(vd_summary_write(f, net, batch, json, &e) == 0, "%s", e.msg);
    fclose(f);
    return buf;
}

START_TEST(test_summary) {
    vd_net net;
    load_ok("nets/alexnet.yaml", &net);
    char *js = summary(&net, 16, true);
    const char *end = js_value(js, 0);
    ck_assert_msg(end && !*js_ws(end), "invalid JSON:\n%s", js);
    ck_assert_ptr_nonnull(strstr(js, "{\n  \"net\": \"alexnet\",\n  \"batch\": 16,\n  \"params\": 61100840,\n"));
    static const char *const keys[] = {"\"flops\": ", "\"layers\": [", "\"shape\": [16, 64, 55, 55]",
                                       "\"name\": \"classifier.6\", \"type\": \"fc\"",
                                       "\"params\": 4097000", "\"bytes\": 64000"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(js, keys[i]) != NULL, "missing %s in\n%s", keys[i], js);
    int rows = 0;
    for (const char *p = js; (p = strstr(p, "{\"name\": ")); p++) rows++;
    ck_assert_int_eq(rows, net.n_layers);
    free(js);
    char *txt = summary(&net, 16, false);
    ck_assert_ptr_nonnull(strstr(txt, "trainable parameters: 61,100,840"));
    ck_assert_ptr_nonnull(strstr(txt, "classifier.6"));
    free(txt);
    vd_err e = {0};
    ck_assert_int_eq(vd_summary_write(stdout, &net, 0, false, &e), VD_EUSAGE);
    vd_net_free(&net);
    /* names with JSON-special characters are escaped (nets not from a spec) */
    load_ok("nets/lenet.yaml", &net);
    snprintf(net.name, sizeof net.name, "a\"b\\c\td");
    js = summary(&net, 1, true);
    end = js_value(js, 0);
    ck_assert_msg(end && !*js_ws(end), "invalid JSON:\n%s", js);
    ck_assert_ptr_nonnull(strstr(js, "\"a\\\"b\\\\c\\td\""));
    free(js);
    vd_net_free(&net);
}
END_TEST

/* ---- robustness --------------------------------------------------------- */

static int parse_bytes(const char *buf, size_t n) {
    vd_net net;
    vd_err e = {0};
    vd_net_init(&net);
    int rc = vd_spec_parse(buf, n, "fuzz.yaml", &net, &e);
    if (rc) ck_assert_msg(e.msg[0] != 0, "error %d without a message", rc);
    vd_net_free(&net);
    return rc;
}

START_TEST(test_fuzz_corpus) {
    char dir[512];
    path_of(dir, sizeof dir, "tools/fuzz/corpus");
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "no %s", dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[1024], *text;
        size_t len;
        vd_err e = {0};
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        ck_assert_int_eq(vd_read_file(p, &text, &len, &e), 0);
        parse_bytes(text, len);
        vd_free(text);
        n++;
    }
    closedir(d);
    ck_assert_int_gt(n, 0);
}
END_TEST

/* Deterministic random mutations of a template-heavy spec: must never crash
 * (the ASan/UBSan CI run checks memory errors). */
START_TEST(test_mutations) {
    char p[512], *text;
    size_t n;
    vd_err e = {0};
    path_of(p, sizeof p, "nets/tiny-resnet.yaml");
    ck_assert_int_eq(vd_read_file(p, &text, &n, &e), 0);
    ck_assert_int_eq(parse_bytes(text, n), 0);
    char *buf = malloc(n + 64);
    ck_assert_ptr_nonnull(buf);
    static const char alphabet[] = "{}[]:,-#&*!|>'\"$ \n\t0123456789abcxyz_.?";
    vd_rng r;
    vd_rng_seed(&r, 42, 7);
    for (int it = 0; it < 600; it++) {
        memcpy(buf, text, n);
        size_t len = n;
        int edits = 1 + (int)(vd_rng_u32(&r) % 4);
        for (int k = 0; k < edits; k++) {
            size_t at = vd_rng_u32(&r) % len;
            switch (vd_rng_u32(&r) % 3) {
            case 0: buf[at] = alphabet[vd_rng_u32(&r) % (sizeof alphabet - 1)]; break;
            case 1: memmove(buf + at, buf + at + 1, len - at - 1); len--; break;
            default: buf[at] = (char)vd_rng_u32(&r); break;
            }
        }
        parse_bytes(buf, len);
    }
    free(buf);
    vd_free(text);
}
END_TEST

/* Hostile specs of a few MiB: parsing takes at most 10 times the text's size,
 * both in counted blocks (vd_mem_stats: the tree, the net) and in the
 * process's peak resident size (which also sees libyaml's own blocks; the
 * document libyaml composed took about 80 times), and each gives its error
 * at FILE:LINE:COL. The text is a plain malloc block, outside both counts'
 * baselines only for the counter. */
static char *repeat_text(const char *head, const char *unit, const char *tail, size_t size, size_t *len) {
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail), n = (size - hl - tl) / ul;
    char *t = malloc(size + 1);
    ck_assert_ptr_nonnull(t);
    memcpy(t, head, hl);
    for (size_t i = 0; i < n; i++) memcpy(t + hl + i * ul, unit, ul);
    memcpy(t + hl + n * ul, tail, tl + 1);
    *len = hl + n * ul + tl;
    return t;
}

static long max_rss_bytes(void) {
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss * 1024L; /* Linux: KiB */
}

START_TEST(test_parse_memory) {
    static const struct {
        const char *head, *unit, *tail;
        size_t size;
        const char *at, *expect; /* "mem.yaml:LINE:" and the message after the column */
    } cases[] = {
        /* two-byte items: denser than the limit, refused before any tree */
        {HDR "layers: [", "1,", "1]\n", 1 << 20,
         "mem.yaml:2:", ": the spec holds too many YAML values for its size"},
        /* four-byte items: the tree is built (about 6.5 times), then refused */
        {HDR "layers:\n", "- 1\n", "", 2 << 20, "mem.yaml:3:", "3: a layer must be a mapping"},
        /* lists 30 deep, over and over */
        {HDR "layers: [", "[ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ "
                          "] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ,", "1]\n", 1 << 20,
         "mem.yaml:2:", "10: a layer must be a mapping"},
    };
    for (size_t c = 0; c < VD_ARRAY_LEN(cases); c++) {
        size_t len;
        char *text = repeat_text(cases[c].head, cases[c].unit, cases[c].tail, cases[c].size, &len);
        vd_mem_stats m0, m1;
        vd_mem_peak_reset();
        vd_mem_stats_get(&m0);
        long rss0 = max_rss_bytes();
        vd_net net;
        vd_err e = {0};
        vd_net_init(&net);
        int rc = vd_spec_parse(text, len, "mem.yaml", &net, &e);
        vd_net_free(&net);
        vd_mem_stats_get(&m1);
        long rss1 = max_rss_bytes();
        ck_assert_int_eq(rc, VD_ESPEC);
        size_t at = strlen(cases[c].at);
        ck_assert_msg(!strncmp(e.msg, cases[c].at, at) && strstr(e.msg, cases[c].expect) >= e.msg + at,
                      "case %zu: %s", c, e.msg);
        ck_assert_msg(m1.peak - m0.live <= 10 * (uint64_t)len, "case %zu: %llu counted bytes for %zu", c,
                      (unsigned long long)(m1.peak - m0.live), len);
#ifndef __SANITIZE_ADDRESS__
        /* not under AddressSanitizer: its allocator pads every block with
         * redzones and keeps freed ones in quarantine (the counted check
         * above still holds there) */
        ck_assert_msg(rss1 - rss0 <= 10 * (long)len, "case %zu: resident size grew %ld bytes for %zu", c,
                      rss1 - rss0, len);
#else
        (void)rss0; (void)rss1;
#endif
        free(text);
    }
}
END_TEST

/* gelu: no keys, keeps its input's shape, no parameters, 14 FLOPs a value. */
START_TEST(test_gelu) {
    vd_net net;
    vd_err e;
    ck_assert_msg(parse(HDR "layers:\n  - { name: c, type: conv, out: 3, kernel: 3 }\n"
                        "  - { name: act, type: gelu }\n" TAIL, &net, &e) == 0, "%s", e.msg);
    const vd_layer *l = layer(&net, "act");
    ck_assert_int_eq(l->op, VD_OP_GELU);
    ck_assert_int_eq(l->c, 3); ck_assert_int_eq(l->h, 6); ck_assert_int_eq(l->w, 6);
    ck_assert_int_eq(l->n_params, 0);
    ck_assert(vd_net_layer_flops(&net, (int)(l - net.layers)) == 14.0 * 3 * 6 * 6);
    char *txt = summary(&net, 2, false);
    ck_assert_msg(strstr(txt, "act   gelu") != NULL, "%s", txt);
    free(txt);
    vd_net_free(&net);
}
END_TEST

/* Parameters carry their role (the executor binds them by it, not by name). */
START_TEST(test_param_roles) {
    vd_net net;
    load_ok("nets/resnet50.yaml", &net);
    static const struct { const char *name; vd_param_role role; vd_param_kind kind; } want[] = {
        {"conv1.weight", VD_ROLE_WEIGHT, VD_PARAM_WEIGHT},
        {"bn1.weight", VD_ROLE_BN_SCALE, VD_PARAM_WEIGHT},
        {"bn1.bias", VD_ROLE_BN_SHIFT, VD_PARAM_WEIGHT},
        {"bn1.running_mean", VD_ROLE_RUNNING_MEAN, VD_PARAM_BUFFER},
        {"bn1.running_var", VD_ROLE_RUNNING_VAR, VD_PARAM_BUFFER},
        {"fc.weight", VD_ROLE_WEIGHT, VD_PARAM_WEIGHT},
        {"fc.bias", VD_ROLE_BIAS, VD_PARAM_WEIGHT},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const vd_param *p = find_param(&net, want[i].name);
        ck_assert_msg(p != NULL, "no parameter %s", want[i].name);
        ck_assert_msg(p->role == want[i].role && p->kind == want[i].kind, "%s: role %d kind %d",
                      want[i].name, (int)p->role, (int)p->kind);
    }
    vd_net_free(&net);
}
END_TEST

/* lr_mult: on layers with parameters, default 1 (unset), 0 allowed, from a
 * template parameter too (a number in any form the keys take). */
START_TEST(test_lr_mult) {
    static const char *const text =
        "input: { channels: 1, height: 8, width: 8, classes: 4 }\n"
        "templates:\n"
        "  blk:\n"
        "    params: { m: 1 }\n"
        "    layers:\n"
        "      - { name: c, type: conv, out: 4, kernel: 3, lr_mult: \"${m}\" }\n"
        "      - { name: bn, type: batchnorm, lr_mult: 0 }\n"
        "layers:\n"
        "  - { use: blk, name: a, with: { m: 0.25 } }\n"
        "  - { use: blk, name: b }\n"
        "  - { name: f, type: fc, out: 4 }\n"
        "  - { name: loss, type: softmax_cross_entropy }\n";
    vd_net net;
    vd_err e;
    ck_assert_msg(parse(text, &net, &e) == 0, "%s", e.msg);
    ck_assert(vd_layer_lr_mult(layer(&net, "a.c")) == 0.25f);
    ck_assert(vd_layer_lr_mult(layer(&net, "b.c")) == 1.0f && layer(&net, "b.c")->lr_mult_set);
    ck_assert(vd_layer_lr_mult(layer(&net, "a.bn")) == 0.0f && layer(&net, "a.bn")->lr_mult_set);
    ck_assert(vd_layer_lr_mult(layer(&net, "f")) == 1.0f && !layer(&net, "f")->lr_mult_set);
    vd_net_free(&net);
}
END_TEST

/* Each test in a TCase of its own (vdt_case), so that CK_RUN_CASE=NAME runs one. */
static TCase *case_of(Suite *s, const TTest *t) {
    TCase *tc = vdt_case(s, t, 120);
    return tc;
}

static Suite *suite(void) {
    Suite *s = suite_create("spec");
    if (g_n_bad > 0) tcase_add_loop_test(case_of(s, test_bad_spec), test_bad_spec, 0, g_n_bad);
    tcase_add_test(case_of(s, test_torchvision_counts), test_torchvision_counts);
    tcase_add_test(case_of(s, test_resnet50_names), test_resnet50_names);
    tcase_add_test(case_of(s, test_googlenet_names), test_googlenet_names);
    tcase_add_test(case_of(s, test_classic_names), test_classic_names);
    tcase_add_test(case_of(s, test_defaults), test_defaults);
    tcase_add_test(case_of(s, test_train_section), test_train_section);
    tcase_add_test(case_of(s, test_data_section), test_data_section);
    tcase_add_test(case_of(s, test_expressions), test_expressions);
    tcase_add_test(case_of(s, test_templates), test_templates);
    tcase_add_test(case_of(s, test_misc_accepts), test_misc_accepts);
    tcase_add_test(case_of(s, test_param_roles), test_param_roles);
    tcase_add_test(case_of(s, test_gelu), test_gelu);
    tcase_add_test(case_of(s, test_lr_mult), test_lr_mult);
    tcase_add_test(case_of(s, test_load_errors), test_load_errors);
    tcase_add_test(case_of(s, test_summary), test_summary);
    tcase_add_test(case_of(s, test_fuzz_corpus), test_fuzz_corpus);
    tcase_add_test(case_of(s, test_mutations), test_mutations);
    tcase_add_test(case_of(s, test_parse_memory), test_parse_memory);
    return s;
}

int main(void) {
    scan_bad();
    if (g_n_bad < 50) {
        fprintf(stderr, "test_spec: expected the bad specs in %s/tests/spec/bad (found %d)\n", srcdir(), g_n_bad);
        return 1;
    }
    return vdt_run(suite());
}
