/* test_data.c — datasets and the loader: formats, corruption, determinism. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tutil.h"
#include <turbojpeg.h>
#include "data/data.h"
#include "data/data_impl.h"
#include "backend/backend.h"

/* ---- fake MNIST (vdt_make_mnist) ------------------------------------------ */

static void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static int open_spec(const char *kind, const char *dir, const vd_net *net, vd_dataset **ds,
                     vd_err *e) {
    char spec[600];
    snprintf(spec, sizeof spec, "%s:%s", kind, dir);
    return vd_data_open(spec, net, 4, 1, false, ds, e);
}

START_TEST(mnist_reads_and_normalises) {
    char *d = vdt_make_mnist(20, 7);
    vd_net net;
    tu_tiny_net(&net, 1, 28, 28, 10, false, 4);
    vd_dataset *ds;
    vd_err e;
    ck_assert_msg(open_spec("mnist", d, &net, &ds, &e) == 0, "%s", e.msg);
    const vd_data_info *in = vd_data_get_info(ds);
    ck_assert_int_eq(in->n[VD_SPLIT_TRAIN], 20);
    ck_assert_int_eq(in->n[VD_SPLIT_TEST], 7);
    float x[784];
    int32_t y;
    ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, 13, 0, x, &y, &e), 0);
    ck_assert_int_eq(y, 3);
    /* the normalisation is exact float arithmetic on x/255: compare exactly */
    ck_assert_float_eq(x[0], (13.0f / 255.0f - 0.1307f) / 0.3081f);
    ck_assert_float_eq(x[1], (1.0f - 0.1307f) / 0.3081f);
    ck_assert_float_eq(x[2], (0.0f - 0.1307f) / 0.3081f);
    ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TEST, 6, 0, x, &y, &e), 0);
    ck_assert_int_eq(y, 6);
    vd_data_close(&ds);
    ck_assert_ptr_null(ds);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* Rewrite one file of a valid MNIST dir, expect VD_EDATA naming it. */
static void expect_mnist_corrupt(const char *file, void (*mutate)(unsigned char *, size_t *),
                                 int want, const char *want_sub) {
    char *d = vdt_make_mnist(10, 5);
    char p[512];
    snprintf(p, sizeof p, "%s/%s", d, file);
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char buf[20000];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    mutate(buf, &n);
    tu_write(p, buf, n);
    vd_net net;
    tu_tiny_net(&net, 1, 28, 28, 10, false, 4);
    vd_dataset *ds = NULL;
    vd_err e;
    int rc = open_spec("mnist", d, &net, &ds, &e);
    ck_assert_int_eq(rc, want);
    ck_assert_ptr_null(ds);
    ck_assert_msg(strstr(e.msg, p) != NULL, "message does not name %s: %s", p, e.msg);
    if (want_sub) ck_assert_msg(strstr(e.msg, want_sub) != NULL, "want '%s' in: %s", want_sub, e.msg);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
static void m_truncate(unsigned char *b, size_t *n) { (void)b; *n -= 1; }
static void m_truncate_hdr(unsigned char *b, size_t *n) { (void)b; *n = 6; }
static void m_magic(unsigned char *b, size_t *n) { (void)n; b[3] = 0x02; }
static void m_gzip(unsigned char *b, size_t *n) { (void)n; b[0] = 0x1f; b[1] = 0x8b; }
static void m_extra(unsigned char *b, size_t *n) { b[*n] = 0; *n += 1; }
static void m_label(unsigned char *b, size_t *n) { (void)n; b[8 + 3] = 12; }
static void m_count(unsigned char *b, size_t *n) { be32(b + 4, 4); *n = 8 + 4; }
static void m_empty(unsigned char *b, size_t *n) { (void)b; *n = 0; }

START_TEST(mnist_corrupt_files_are_edata) {
    expect_mnist_corrupt("train-images-idx3-ubyte", m_truncate, VD_EDATA, "truncated");
    expect_mnist_corrupt("train-images-idx3-ubyte", m_truncate_hdr, VD_EDATA, "truncated");
    expect_mnist_corrupt("t10k-images-idx3-ubyte", m_magic, VD_EDATA, "magic");
    expect_mnist_corrupt("train-labels-idx1-ubyte", m_gzip, VD_EDATA, "gzip");
    expect_mnist_corrupt("t10k-labels-idx1-ubyte", m_extra, VD_EDATA, NULL);
    expect_mnist_corrupt("train-labels-idx1-ubyte", m_label, VD_EDATA, "label");
    expect_mnist_corrupt("train-labels-idx1-ubyte", m_count, VD_EDATA, "labels");
    expect_mnist_corrupt("t10k-labels-idx1-ubyte", m_empty, VD_EDATA, NULL);
}
END_TEST

START_TEST(mnist_missing_file_is_eio) {
    char *d = vdt_make_mnist(10, 5);
    char p[512];
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", d);
    ck_assert_int_eq(unlink(p), 0);
    vd_net net;
    tu_tiny_net(&net, 1, 28, 28, 10, false, 4);
    vd_dataset *ds = NULL;
    vd_err e;
    ck_assert_int_eq(open_spec("mnist", d, &net, &ds, &e), VD_EIO);
    ck_assert_msg(strstr(e.msg, p) != NULL, "%s", e.msg);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(shape_mismatch_is_usage_error) {
    char *d = vdt_make_mnist(10, 5);
    vd_net net;
    tu_tiny_net(&net, 3, 28, 28, 10, false, 4);
    vd_dataset *ds = NULL;
    vd_err e;
    ck_assert_int_eq(open_spec("mnist", d, &net, &ds, &e), VD_EUSAGE);
    ck_assert_msg(strstr(e.msg, "1x28x28") && strstr(e.msg, "3x28x28"), "%s", e.msg);
    vd_net_free(&net);
    tu_tiny_net(&net, 1, 28, 28, 5, false, 4);   /* too few classes */
    ck_assert_int_eq(open_spec("mnist", d, &net, &ds, &e), VD_EUSAGE);
    ck_assert_msg(strstr(e.msg, "10 classes"), "%s", e.msg);
    vd_net_free(&net);
    tu_tiny_net(&net, 1, 28, 28, 10, false, 4);
    ck_assert_int_eq(open_spec("cifar10", d, &net, &ds, &e), VD_EUSAGE);
    ck_assert_int_eq(vd_data_open("minst:x", &net, 4, 1, false, &ds, &e), VD_EUSAGE);
    ck_assert_msg(strstr(e.msg, "mnist"), "no suggestion: %s", e.msg);
    ck_assert_int_eq(vd_data_open("mnist", &net, 4, 1, false, &ds, &e), VD_EUSAGE);
    ck_assert_int_eq(vd_data_open("synthetic:0", &net, 4, 1, false, &ds, &e), VD_EUSAGE);
    ck_assert_int_eq(vd_data_open("synthetic:10,x", &net, 4, 1, false, &ds, &e), VD_EUSAGE);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- fake CIFAR-10 ----------------------------------------------------- */

static char *make_cifar(int per_file) {
    char *d = vdt_tmpdir("vdnn-train-test");
    size_t n = (size_t)per_file * 3073;
    unsigned char *b = calloc(1, n);
    for (int f = 1; f <= 6; f++) {
        for (int r = 0; r < per_file; r++) {
            unsigned char *rec = b + (size_t)r * 3073;
            rec[0] = (unsigned char)((f * 7 + r) % 10);
            rec[1] = 255;            /* R[0] */
            rec[1 + 1024] = 0;       /* G[0] */
            rec[1 + 2048 + 5] = 51;  /* B[5] */
        }
        char p[512];
        if (f <= 5) snprintf(p, sizeof p, "%s/data_batch_%d.bin", d, f);
        else snprintf(p, sizeof p, "%s/test_batch.bin", d);
        tu_write(p, b, n);
    }
    free(b);
    return d;
}

START_TEST(cifar_reads_and_normalises) {
    char *d = make_cifar(3);
    vd_net net;
    tu_tiny_net(&net, 3, 32, 32, 10, false, 4);
    vd_dataset *ds;
    vd_err e;
    ck_assert_msg(open_spec("cifar10", d, &net, &ds, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(vd_data_get_info(ds)->n[0], 15);
    ck_assert_int_eq(vd_data_get_info(ds)->n[1], 3);
    float x[3072];
    int32_t y;
    ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, 4, 0, x, &y, &e), 0); /* file 2, rec 1 */
    ck_assert_int_eq(y, (2 * 7 + 1) % 10);
    ck_assert_float_eq(x[0], (1.0f - 0.4914f) / 0.2470f);
    ck_assert_float_eq(x[1024], (0.0f - 0.4822f) / 0.2435f);
    ck_assert_float_eq(x[2048 + 5], (51.0f / 255.0f - 0.4465f) / 0.2616f);
    vd_data_close(&ds);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(cifar_corrupt_is_edata) {
    char *d = make_cifar(2);
    vd_net net;
    tu_tiny_net(&net, 3, 32, 32, 10, false, 4);
    vd_dataset *ds = NULL;
    vd_err e;
    char p[512];
    snprintf(p, sizeof p, "%s/data_batch_3.bin", d);
    ck_assert_int_eq(truncate(p, 3073 * 2 - 100), 0);
    ck_assert_int_eq(open_spec("cifar10", d, &net, &ds, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, p) != NULL, "%s", e.msg);
    ck_assert_int_eq(truncate(p, 3073 * 2), 0);
    FILE *f = fopen(p, "r+b");
    fseek(f, 3073, SEEK_SET);
    fputc(200, f);                 /* label of record 1 */
    fclose(f);
    ck_assert_int_eq(open_spec("cifar10", d, &net, &ds, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "label"), "%s", e.msg);
    ck_assert_ptr_null(ds);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- image folders ------------------------------------------------------ */

static void write_ppm(const char *path, int w, int h, unsigned char r, unsigned char g,
                      unsigned char b) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "P6\n%d %d\n255\n", w, h);
    for (int i = 0; i < w * h; i++) { fputc(r, f); fputc(g, f); fputc(b, f); }
    fclose(f);
}

START_TEST(folder_labels_resize_and_corrupt) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    const char *dirs[] = { "train", "train/cat", "train/ant", "val", "val/cat" };
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", d, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof p, "%s/train/cat/b.ppm", d); write_ppm(p, 40, 20, 255, 0, 51);
    snprintf(p, sizeof p, "%s/train/cat/a.PPM", d); write_ppm(p, 9, 13, 0, 255, 0);
    snprintf(p, sizeof p, "%s/train/ant/z.ppm", d); write_ppm(p, 8, 8, 10, 20, 30);
    snprintf(p, sizeof p, "%s/train/ant/notes.txt", d); tu_write(p, "hi", 2);
    /* the header of every image is checked when the data set opens */
    snprintf(p, sizeof p, "%s/val/cat/bad.jpg", d); tu_write(p, "not a jpeg at all", 17);
    vd_net net;
    tu_tiny_net(&net, 3, 16, 16, 10, false, 2);
    vd_dataset *ds;
    vd_err e;
    ck_assert_int_eq(open_spec("folder", d, &net, &ds, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "val/cat/bad.jpg: not a JPEG, PNG"), "%s", e.msg);
    unlink(p);
    /* a good header over cut pixel data fails when decoded, naming the file */
    snprintf(p, sizeof p, "%s/val/cat/bad.png", d); tu_write_bad_png(p);
    ck_assert_msg(open_spec("folder", d, &net, &ds, &e) == 0, "%s", e.msg);
    const vd_data_info *in = vd_data_get_info(ds);
    ck_assert_int_eq(in->classes, 2);
    ck_assert_int_eq(in->n[0], 3);
    ck_assert_int_eq(in->n[1], 1);
    float x[3 * 16 * 16];
    int32_t y;
    /* sorted: ant/z (label 0), cat/a.PPM (1), cat/b (1) */
    ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, 0, 0, x, &y, &e), 0);
    ck_assert_int_eq(y, 0);
    ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, 2, 0, x, &y, &e), 0);
    ck_assert_int_eq(y, 1);
    /* a uniform image stays uniform through the resampling (8 bits, the
     * weights sum to 1); the normalisation's float arithmetic against the
     * closed form: a few ulps of the normalised value */
    float want[3] = { (1.0f - 0.485f) / 0.229f, (0.0f - 0.456f) / 0.224f,
                      (0.2f - 0.406f) / 0.225f };
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 256; i++)
            ck_assert_msg(fabsf(x[c * 256 + i] - want[c]) < 1e-5f, "c%d i%d: %g vs %g", c, i,
                          (double)x[c * 256 + i], (double)want[c]);
    int rc = vd_data_sample(ds, VD_SPLIT_TEST, 0, 0, x, &y, &e);
    ck_assert_int_eq(rc, VD_EDATA);
    ck_assert_msg(strstr(e.msg, "val/cat/bad.png: cannot decode"), "%s", e.msg);
    /* ...and through the loader the error surfaces from vd_loader_next */
    vd_loader *ld;
    vd_loader_cfg cfg = { .split = VD_SPLIT_TEST, .batch = 2, .seed = 1 };
    ck_assert_int_eq(vd_loader_create(&ld, ds, &cfg, &e), 0);
    float xb[2 * 768];
    int32_t yb[2];
    ck_assert_int_eq(vd_loader_next(ld, xb, yb, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "bad.png"), "%s", e.msg);
    vd_loader_destroy(&ld);
    vd_data_close(&ds);
    /* a val class without a train counterpart */
    snprintf(p, sizeof p, "%s/val/dog", d);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    ck_assert_int_eq(open_spec("folder", d, &net, &ds, &e), VD_EDATA);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- synthetic and the loader ------------------------------------------- */

START_TEST(synthetic_is_deterministic_and_unit_normal) {
    vd_net net;
    tu_tiny_net(&net, 3, 8, 8, 10, false, 4);
    vd_dataset *a, *b, *c;
    vd_err e;
    ck_assert_int_eq(vd_data_open(NULL, &net, 4, 42, false, &a, &e), 0);
    ck_assert_int_eq(vd_data_open("synthetic:5000,300", &net, 4, 42, false, &b, &e), 0);
    ck_assert_int_eq(vd_data_open("synthetic", &net, 4, 43, false, &c, &e), 0);
    ck_assert_int_eq(vd_data_get_info(a)->n[0], 4096);
    ck_assert_int_eq(vd_data_get_info(a)->n[1], 64);
    ck_assert_int_eq(vd_data_get_info(b)->n[0], 5000);
    ck_assert_int_eq(vd_data_get_info(b)->n[1], 300);
    float xa[192], xb[192], xc[192];
    int32_t ya, yb, yc;
    double s = 0, s2 = 0;
    int n = 0, hist[10] = { 0 };
    for (int i = 0; i < 2000; i++) {
        vd_data_sample(a, VD_SPLIT_TRAIN, i, 0, xa, &ya, &e);
        vd_data_sample(b, VD_SPLIT_TRAIN, i, 0, xb, &yb, &e);
        ck_assert_int_eq(ya, yb);
        ck_assert_mem_eq(xa, xb, sizeof xa);
        ck_assert(ya >= 0 && ya < 10);
        hist[ya]++;
        for (int j = 0; j < 192; j++) { s += xa[j]; s2 += (double)xa[j] * xa[j]; n++; }
    }
    vd_data_sample(c, VD_SPLIT_TRAIN, 7, 0, xc, &yc, &e);
    vd_data_sample(a, VD_SPLIT_TRAIN, 7, 0, xa, &ya, &e);
    ck_assert(memcmp(xa, xc, sizeof xa) != 0);        /* the seed matters */
    vd_data_sample(a, VD_SPLIT_TEST, 7, 0, xb, &yb, &e);
    ck_assert(memcmp(xa, xb, sizeof xa) != 0);        /* test split differs */
    /* 384000 values: the mean's standard error is ~0.0016 and the variance's
     * ~0.0023 for i.i.d. N(0,1), but the pixels of a class share its
     * template (10 templates of 192 values: a third of the variance), so
     * allow 0.05 */
    double mean = s / n, var = s2 / n - mean * mean;
    ck_assert_msg(fabs(mean) < 0.05 && fabs(var - 1.0) < 0.05, "mean %g var %g", mean, var);
    for (int k = 0; k < 10; k++) ck_assert_msg(hist[k] > 120, "class %d drawn %d/2000", k, hist[k]);
    vd_data_close(&a);
    vd_data_close(&b);
    vd_data_close(&c);
    vd_net_free(&net);
}
END_TEST

/* An independent statement of the synthetic formula (data/synth.h), from
 * splitmix64 as published (Steele, Lea, Flood 2014): the state advances by
 * the gamma, the output is the finalized state; element j of a sample is
 * the (j+1)-th output of the generator started at the sample's key. */
static uint64_t ref_splitmix(uint64_t *st) {
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t ref_mix(uint64_t x) { return ref_splitmix(&x); }
/* the four 16-bit parts of h summed (Irwin-Hall), centred on their mean */
static int32_t ref_ih(uint64_t h) {
    int32_t s = 0;
    for (int k = 0; k < 4; k++) s += (int32_t)((h >> (16 * k)) & 0xFFFF);
    return s - 131070;            /* 4 x the mean of one part, 32767.5 */
}
static int32_t ref_sample(uint64_t seed, int split, int64_t index, int classes, int64_t n,
                          float *x) {
    uint64_t key = ref_mix(seed ^ ref_mix(((uint64_t)split << 56) ^ (uint64_t)index));
    int32_t label = (int32_t)(key % (uint64_t)classes);
    uint64_t noise = key, tmpl = ref_mix(seed ^ ref_mix(0x7E3B1A7Eull + (uint64_t)label));
    /* (noise + template / 2) / sqrt(1.25), each of variance 4 (65536^2 - 1) / 12 */
    float scale = (float)(1.0 / sqrt(1.25 * 4.0 * (65536.0 * 65536.0 - 1.0) / 12.0) / 2.0);
    for (int64_t j = 0; j < n; j++) {
        int32_t v = 2 * ref_ih(ref_splitmix(&noise)) + ref_ih(ref_splitmix(&tmpl));
        x[j] = (float)v * scale;
    }
    return label;
}

/* Synthetic samples are exactly the formula: vd_data_sample (the host
 * loader's source) and the CPU backend's fill_synthetic (what the training
 * loop uses), floats bit for bit (NCHW, and channels-last with b.nhwc: math
 * tf32), bf16 and fp16 as the floats rounded to nearest even
 * (vd_f32_to_bf16, vd_f32_to_f16, tested in util-bf16). */
START_TEST(synthetic_matches_reference_formula) {
    /* the published splitmix64 outputs from state 0 pin the reference */
    uint64_t st = 0;
    ck_assert_uint_eq(ref_splitmix(&st), 0xE220A8397B1DCDAFull);
    ck_assert_uint_eq(ref_splitmix(&st), 0x6E789E6AA1B965F4ull);
    enum { C = 3, H = 5, W = 7, M = C * H * W, NS = 40 };
    vd_net net;
    tu_tiny_net(&net, C, H, W, 10, false, 4);
    vd_dataset *ds;
    vd_err e;
    ck_assert_int_eq(vd_data_open("synthetic:5000,300", &net, 4, 42, false, &ds, &e), 0);
    float ref[NS][M], got[M];
    int32_t lab[NS], y;
    int64_t idx[NS];
    vd_synth_batch b = { .seed = 42, .split = VD_SPLIT_TRAIN, .classes = 10, .sample_numel = M,
                         .channels = C, .n = NS, .index = idx };
    for (int split = 0; split < 2; split++) {
        b.split = split;
        for (int i = 0; i < NS; i++) {
            idx[i] = (int64_t)((i * 37 + split * 11) % (split ? 300 : 5000));
            lab[i] = ref_sample(42, split, idx[i], 10, M, ref[i]);
            ck_assert_int_eq(vd_data_sample(ds, (vd_split)split, idx[i], 0, got, &y, &e), 0);
            ck_assert_int_eq(y, lab[i]);
            ck_assert_mem_eq(got, ref[i], sizeof got);
        }
        vd_backend *be;
        ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
        float *xf = malloc(sizeof(float) * NS * M), *xc = malloc(sizeof(float) * NS * M);
        uint16_t *xh = malloc(sizeof(uint16_t) * NS * M), *xq = malloc(sizeof(uint16_t) * NS * M);
        ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_COMPUTE, 0, xf, VD_DT_F32, &b, &e), 0);
        b.nhwc = true;
        ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_COMPUTE, 0, xc, VD_DT_F32, &b, &e), 0);
        b.nhwc = false;
        ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_H2D, 0, xh, VD_DT_BF16, &b, &e), 0);
        ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_H2D, 0, xq, VD_DT_F16, &b, &e), 0);
        ck_assert_int_eq(be->synchronize(be, &e), 0);    /* the H2D fill runs when awaited */
        ck_assert_mem_eq(xf, ref, sizeof ref);
        for (int i = 0; i < NS; i++)
            for (int j = 0; j < M; j++) {  /* 16-bit is channels-last: NCHW j at p*C + c */
                int at = i * M + (j % (H * W)) * C + j / (H * W);
                ck_assert_uint_eq(xh[at], vd_f32_to_bf16(ref[i][j]));
                ck_assert_uint_eq(xq[at], vd_f32_to_f16(ref[i][j]));
                ck_assert(!memcmp(&xc[at], &ref[i][j], sizeof(float)));
            }
        free(xf);
        free(xc);
        free(xh);
        free(xq);
        be->destroy(be);
    }
    vd_data_close(&ds);
    vd_net_free(&net);
    /* a batch of 2.4 M elements, which the CPU backend makes in parts on
     * several threads (where there are several cores): sample by sample the
     * data set's (the reference's, above) */
    enum { BN = 48, BM = 3 * 128 * 128 };
    tu_tiny_net(&net, 3, 128, 128, 10, false, BN);
    ck_assert_int_eq(vd_data_open("synthetic:5000", &net, BN, 9, false, &ds, &e), 0);
    float *big = malloc(sizeof(float) * BN * BM), *one = malloc(sizeof(float) * BM);
    int64_t bidx[BN];
    for (int i = 0; i < BN; i++) bidx[i] = 4999 - 3 * i;
    vd_synth_batch bb = { .seed = 9, .split = VD_SPLIT_TRAIN, .classes = 10, .sample_numel = BM,
                          .n = BN, .index = bidx };
    vd_backend *be;
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
    ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_COMPUTE, 0, big, VD_DT_F32, &bb, &e), 0);
    for (int i = 0; i < BN; i++) {
        ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, bidx[i], 0, one, &y, &e), 0);
        ck_assert_mem_eq(big + (size_t)i * BM, one, sizeof(float) * BM);
    }
    free(big);
    free(one);
    be->destroy(be);
    vd_data_close(&ds);
    vd_net_free(&net);
}
END_TEST

/* The reference resampling of one axis, in double, from its definition
 * (data_impl.h, vd_image_resize): box [b0, b0 + bw) of an axis of len
 * pixels to out samples. Shrinking: output o is the mean of the box's
 * stretch [b0 + o/s, b0 + (o+1)/s) (s = out / bw), each pixel weighted by its
 * overlap; growing: bilinear at b0 + (o + 0.5)/s - 0.5 in pixel indices, the
 * indices clamped to the box's whole pixels. w[o * len + i]. */
static void ref_axis(double b0, double bw, int len, int out, double *w) {
    int p0 = (int)floor(b0), p1 = (int)ceil(b0 + bw);
    if (p1 > len) p1 = len;
    double s = out / bw;
    memset(w, 0, sizeof(double) * (size_t)out * (size_t)len);
    for (int o = 0; o < out; o++) {
        double *wo = w + (size_t)o * len;
        if (s <= 1) {
            double lo = b0 + o / s, hi = b0 + (o + 1) / s;
            for (int i = p0; i < p1; i++) {
                double ov = fmin(hi, i + 1.0) - fmax(lo, (double)i);
                if (ov > 0) wo[i] += ov * s;
            }
        } else {
            double u = b0 + (o + 0.5) / s - 0.5;
            int i0 = (int)floor(u);
            double t = u - i0;
            int a = i0 < p0 ? p0 : i0 > p1 - 1 ? p1 - 1 : i0;
            int c = i0 + 1 < p0 ? p0 : i0 + 1 > p1 - 1 ? p1 - 1 : i0 + 1;
            wo[a] += 1 - t;
            wo[c] += t;
        }
    }
}

/* A folder sample against the reference: the centre box of the image
 * (vd_box_center: the image scaled to cover the input / 0.875, its centre),
 * resampled per axis (ref_axis), rounded to 8 bits (half up), normalised.
 * Images of random pixels (every weight matters: a box a pixel off changes
 * values by tens of levels), RGB to a 3-channel net and grey (PGM) to a
 * 1-channel one, landscape and portrait, shrunk (area) and grown
 * (bilinear), square and not. */
START_TEST(folder_resample_matches_reference) {
    static const struct { int w, h, c, H, W; } cases[] = {
        { 37, 23, 3, 16, 16 }, { 23, 37, 1, 16, 16 }, { 50, 40, 3, 12, 20 }, { 9, 7, 3, 16, 16 },
    };
    for (size_t k = 0; k < VD_ARRAY_LEN(cases); k++) {
        int w = cases[k].w, h = cases[k].h, C = cases[k].c, H = cases[k].H, W = cases[k].W;
        char *d = vdt_tmpdir("vdnn-train-test");
        char p[600];
        snprintf(p, sizeof p, "%s/train", d);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof p, "%s/train/a", d);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof p, "%s/train/a/img.%s", d, C == 3 ? "ppm" : "pgm");
        unsigned char *px = malloc((size_t)w * h * C);
        uint64_t st = 99 + k;
        for (int i = 0; i < w * h * C; i++) px[i] = (unsigned char)(ref_splitmix(&st) >> 56);
        FILE *f = fopen(p, "wb");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "P%c\n%d %d\n255\n", C == 3 ? '6' : '5', w, h);
        ck_assert_int_eq(fwrite(px, 1, (size_t)w * h * C, f), (size_t)w * h * C);
        fclose(f);
        vd_net net;
        tu_tiny_net(&net, C, H, W, 10, false, 1);
        vd_dataset *ds;
        vd_err e;
        ck_assert_int_eq(open_spec("folder", d, &net, &ds, &e), 0);
        float *x = malloc(sizeof(float) * (size_t)C * H * W);
        int32_t y;
        ck_assert_msg(vd_data_sample(ds, VD_SPLIT_TRAIN, 0, 0, x, &y, &e) == 0, "%s", e.msg);
        /* the reference: the box from the closed form (as vd_box_center) */
        double s = fmax(H / (0.875 * h), W / (0.875 * w));
        double bw = W / s, bh = H / s, bx = (w - bw) / 2, by = (h - bh) / 2;
        double *wx = malloc(sizeof(double) * (size_t)W * w);
        double *wy = malloc(sizeof(double) * (size_t)H * h);
        ref_axis(bx, bw, w, W, wx);
        ref_axis(by, bh, h, H, wy);
        static const double mean3[3] = { 0.485, 0.456, 0.406 }, std3[3] = { 0.229, 0.224, 0.225 };
        int near = 0;
        for (int c = 0; c < C; c++)
            for (int oy = 0; oy < H; oy++)
                for (int ox = 0; ox < W; ox++) {
                    double v = 0;
                    for (int j = 0; j < h; j++)
                        for (int i = 0; i < w; i++)
                            v += wy[(size_t)oy * h + j] * wx[(size_t)ox * w + i] *
                                 px[((size_t)j * w + i) * C + c];
                    double r8 = floor(v + 0.5);
                    double m = C == 3 ? mean3[c] : 0.449, sd = C == 3 ? std3[c] : 0.226;
                    double got = x[((size_t)c * H + oy) * W + ox], level = 1 / (255 * sd);
                    double dv = (got - (r8 / 255 - m) / sd) / level;   /* in 8-bit levels */
                    /* stb_image_resize sums in float: its 8-bit value may round
                     * the other way where the exact value lies within 0.002 of
                     * a half (measured: within 1e-4); elsewhere the same level,
                     * up to the normalisation's float rounding (1e-5 of a level
                     * of values up to 2.7) */
                    if (fabs(dv) < 1e-3) continue;
                    bool half = fabs(v - floor(v) - 0.5) < 0.002;
                    ck_assert_msg(half && fabs(fabs(dv) - 1) < 1e-3, "case %zu c%d (%d, %d): %g "
                                  "levels from the reference (exact value %.4f)", k, c, ox, oy, dv,
                                  v);
                    near++;
                }
        ck_assert_int_le(near, 2);   /* ties are rare: a handful in 768 values at most */
        free(wx);
        free(wy);
        free(x);
        free(px);
        vd_data_close(&ds);
        vd_net_free(&net);
        vdt_rmrf(d);
        vd_free(d);
    }
}
END_TEST

/* The boxes (crop.c): the centre box in closed form; RandomResizedCrop's
 * within its ranges, whole pixels inside the image, a pure function of the
 * key, spread over its ranges, and its fallback on a strip no box fits. */
START_TEST(crop_boxes_center_and_random_resized) {
    vd_box b;
    /* torchvision's Resize(256) + CenterCrop(224) of a 500x375 photo: the
     * shorter side 375 * 0.875 = 328.125 pixels, centred */
    vd_box_center(500, 375, 224, 224, &b);
    ck_assert_double_eq_tol(b.w, 328.125, 1e-9);
    ck_assert_double_eq_tol(b.h, 328.125, 1e-9);
    ck_assert_double_eq_tol(b.x, (500 - 328.125) / 2, 1e-9);
    ck_assert_double_eq_tol(b.y, (375 - 328.125) / 2, 1e-9);
    /* a 12x20 (HxW) input from 50x40: the width binds, 20 / (0.875 * 50) */
    vd_box_center(50, 40, 12, 20, &b);
    ck_assert_double_eq_tol(b.w, 0.875 * 50, 1e-9);
    ck_assert_double_eq_tol(b.h, 0.875 * 50 * 12 / 20, 1e-9);
    ck_assert_double_eq_tol(b.x, (50 - 43.75) / 2, 1e-9);
    ck_assert_double_eq_tol(b.y, (40 - 26.25) / 2, 1e-9);

    enum { N = 4000 };
    double sum_area = 0, rmin = 10, rmax = 0, amin = 10, amax = 0;
    int flips = 0, same = 0;
    vd_box prev = {0};
    for (uint64_t key = 0; key < N; key++) {
        bool flip, flip2;
        vd_box c;
        vd_box_random_resized(400, 300, key, &b, &flip);
        vd_box_random_resized(400, 300, key, &c, &flip2);
        ck_assert(memcmp(&b, &c, sizeof b) == 0 && flip == flip2);   /* deterministic */
        ck_assert(b.x == floor(b.x) && b.y == floor(b.y) && b.w == floor(b.w) && b.h == floor(b.h));
        ck_assert(b.x >= 0 && b.y >= 0 && b.w >= 1 && b.h >= 1 && b.x + b.w <= 400 &&
                  b.y + b.h <= 300);
        /* w and h are rounded from the drawn area and ratio: half a pixel each */
        double alo = (b.w - 0.5) * (b.h - 0.5) / 120000, ahi = (b.w + 0.5) * (b.h + 0.5) / 120000;
        ck_assert_msg(ahi >= 0.08 && alo <= 1, "key %llu: area %gx%g", (unsigned long long)key,
                      b.w, b.h);
        ck_assert_msg((b.w + 0.5) / (b.h - 0.5) >= 0.75 && (b.w - 0.5) / (b.h + 0.5) <= 4.0 / 3,
                      "key %llu: ratio of %gx%g", (unsigned long long)key, b.w, b.h);
        double area = b.w * b.h / 120000, r = b.w / b.h;
        sum_area += area;
        amin = fmin(amin, area);
        amax = fmax(amax, area);
        rmin = fmin(rmin, r);
        rmax = fmax(rmax, r);
        flips += flip;
        same += memcmp(&b, &prev, sizeof b) == 0;
        prev = b;
    }
    /* spread: the area fraction drawn uniform over [0.08, 1], the ratio
     * log-uniform over [3/4, 4/3]; the draws that do not fit the 4:3 image
     * (large and far from its ratio) drawn again, so the mean area is 0.433
     * (torchvision's get_params simulated in Python, 200,000 draws), not
     * 0.54; the flip a fair coin. 4000 draws: each mean within 5 standard
     * deviations (area: 0.25 / sqrt(4000) = 0.004; flips: 32) */
    ck_assert_msg(fabs(sum_area / N - 0.433) < 0.02, "mean area %g", sum_area / N);
    ck_assert(amin < 0.09 && amax > 0.97);
    ck_assert(rmin < 0.76 && rmax > 1.31);
    ck_assert_msg(abs(flips - N / 2) < 160, "%d flips of %d", flips, N);
    ck_assert_int_lt(same, 5);
    /* a strip that no box of the ranges fits (the least area 0.08 * 1000 * 10
     * needs sides of 24): the centre box of the whole strip at the ratio
     * range's end */
    bool flip;
    vd_box_random_resized(1000, 10, 7, &b, &flip);
    ck_assert(b.w == 13 && b.h == 10 && b.x == 493 && b.y == 0);   /* round(10 * 4/3) */
    vd_box_random_resized(10, 1000, 7, &b, &flip);
    ck_assert(b.w == 10 && b.h == 13 && b.x == 0 && b.y == 493);   /* round(10 / (3/4)) */
}
END_TEST

/* vd_image_resize over many geometries: images of 1 to 300 pixels a side,
 * centre and RandomResizedCrop boxes, inputs of 1 to 64, shrunk, grown and
 * both at once (stb_image_resize must not fail, nor hit one of its
 * assertions); a constant image stays that constant exactly (the weights
 * sum to 1; 8-bit rounding absorbs the float sums' error). */
START_TEST(resize_any_geometry) {
    uint64_t st = 7;
    unsigned char *px = malloc(300 * 300 * 3), out[64 * 64 * 3];
    void *work = NULL;
    size_t cap = 0;
    vd_err e;
    for (int k = 0; k < 400; k++) {
        int iw = 1 + (int)(ref_splitmix(&st) % 300), ih = 1 + (int)(ref_splitmix(&st) % 300);
        int W = 1 + (int)(ref_splitmix(&st) % 64), H = 1 + (int)(ref_splitmix(&st) % 64);
        int C = k % 2 ? 3 : 1;
        unsigned char v = (unsigned char)(ref_splitmix(&st) >> 56);
        memset(px, v, (size_t)iw * ih * C);
        vd_box b;
        bool flip;
        if (k % 3) vd_box_random_resized(iw, ih, ref_splitmix(&st), &b, &flip);
        else vd_box_center(iw, ih, H, W, &b);
        ck_assert_msg(vd_image_resize(px, iw, ih, C, &b, out, W, H, &work, &cap, &e) == 0, "%s",
                      e.msg);
        for (int i = 0; i < W * H * C; i++)
            ck_assert_msg(out[i] == v, "%dx%d box %gx%g at (%g, %g) to %dx%d: %d, not %d", iw, ih,
                          b.w, b.h, b.x, b.y, W, H, out[i], v);
    }
    vd_free(work);
    free(px);
}
END_TEST

/* The spec's data.normalize (net->norm) replaces each kind's mean and std:
 * (x/255 - mean[c]) / std[c] of constant images, in closed form. */
START_TEST(normalize_from_the_spec) {
    vd_err e;
    vd_dataset *ds;
    float x[3 * 32 * 32];
    int32_t y;
    /* folder: a constant image stays constant through the resampling */
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    snprintf(p, sizeof p, "%s/train", d);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/train/a", d);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/train/a/c.ppm", d);
    write_ppm(p, 30, 20, 255, 0, 51);
    vd_net net;
    tu_tiny_net(&net, 3, 8, 8, 10, false, 2);
    net.norm = (vd_data_norm){ .n = 3, .mean = { 0.5f, 0.25f, 0.1f },
                               .std = { 0.5f, 0.25f, 0.2f } };
    ck_assert_msg(open_spec("folder", d, &net, &ds, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, 0, 0, x, &y, &e), 0);
    const double want[3] = { (1 - 0.5) / 0.5, (0 - 0.25) / 0.25, (0.2 - 0.1) / 0.2 };
    /* float arithmetic (the table's v / (255 std) - mean / std) against
     * double: a few ulps of values up to 1 */
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 64; i++)
            ck_assert_msg(fabs(x[c * 64 + i] - want[c]) < 1e-6, "c%d: %g, want %g", c,
                          (double)x[c * 64 + i], want[c]);
    uint16_t xb[3 * 64];   /* the bf16 path takes the same table */
    vd_dataset *ds2;
    ck_assert_int_eq(open_spec("folder", d, &net, &ds2, &e), 0);
    vd_loader *ld;
    vd_loader_cfg cfg = { .split = VD_SPLIT_TRAIN, .batch = 1, .threads = 1 };
    ck_assert_int_eq(vd_loader_create(&ld, ds2, &cfg, &e), 0);
    int32_t yb;
    ck_assert_int_eq(vd_loader_next_as(ld, xb, VD_DT_BF16, true, &yb, &e), 0);
    ck_assert_int_eq(vd_loader_next_as(ld, xb, VD_DT_BF16, true, &yb, &e), 0);   /* made in bf16 */
    for (int i = 0; i < 64; i++)
        for (int c = 0; c < 3; c++)
            ck_assert_uint_eq(xb[i * 3 + c], vd_f32_to_bf16(x[c * 64 + i]));
    vd_loader_destroy(&ld);
    vd_data_close(&ds2);
    vd_data_close(&ds);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
    /* mnist: pixel 1 of every image is 255, pixel 2 is 0 */
    d = vdt_make_mnist(5, 3);
    tu_tiny_net(&net, 1, 28, 28, 10, false, 4);
    net.norm = (vd_data_norm){ .n = 1, .mean = { 0.5f }, .std = { 0.25f } };
    ck_assert_int_eq(open_spec("mnist", d, &net, &ds, &e), 0);
    ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TEST, 1, 0, x, &y, &e), 0);
    ck_assert_float_eq(x[1], (1.0f - 0.5f) / 0.25f);
    ck_assert_float_eq(x[2], (0.0f - 0.5f) / 0.25f);
    vd_data_close(&ds);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
    /* cifar10: R[0] = 255, G[0] = 0, B[5] = 51 */
    d = make_cifar(2);
    tu_tiny_net(&net, 3, 32, 32, 10, false, 4);
    net.norm = (vd_data_norm){ .n = 3, .mean = { 0.5f, 0.5f, 0.5f }, .std = { 0.5f, 0.25f, 0.1f } };
    ck_assert_int_eq(open_spec("cifar10", d, &net, &ds, &e), 0);
    ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, 0, 0, x, &y, &e), 0);
    ck_assert_float_eq(x[0], (1.0f - 0.5f) / 0.5f);
    ck_assert_float_eq(x[1024], (0.0f - 0.5f) / 0.25f);
    ck_assert_float_eq(x[2048 + 5], (51.0f / 255.0f - 0.5f) / 0.1f);
    vd_data_close(&ds);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* --val-split on a folder of 30 images (tu_class_folder: the first pixel, 8 i, identifies each):
 * round(F * 30) held out, the two splits disjoint and together the folder,
 * the same for the same seed and another for another; the bad uses
 * VD_EUSAGE with the reason. */
static void val_ids(vd_dataset *ds, vd_split sp, int *ids, int *n) {
    *n = (int)vd_data_get_info(ds)->n[sp];
    float x[16];
    int32_t y;
    vd_err e;
    for (int i = 0; i < *n; i++) {
        ck_assert_int_eq(vd_data_sample(ds, sp, i, 0, x, &y, &e), 0);
        ids[i] = (int)lround(((double)x[0] * 0.226 + 0.449) * 255 / 8);
    }
}

START_TEST(val_split_holds_out_a_seeded_fraction) {
    char *d = vdt_tmpdir("vdnn-train-test");
    tu_class_folder(d, 4);
    vd_net net;
    tu_tiny_net(&net, 1, 4, 4, 3, false, 2);
    char spec[700];
    snprintf(spec, sizeof spec, "folder:%s", d);
    vd_err e;
    int tr[2][30] = {{0}}, va[2][30] = {{0}}, ntr, nva;
    for (int run = 0; run < 2; run++) {
        vd_dataset *ds;
        ck_assert_int_eq(vd_data_open(spec, &net, 2, 5, false, &ds, &e), 0);
        ck_assert_msg(vd_data_hold_out(ds, 0.2, &e) == 0, "%s", e.msg);
        ck_assert_msg(strstr(vd_data_get_info(ds)->desc, "24 train, 6 val"), "%s",
                      vd_data_get_info(ds)->desc);
        val_ids(ds, VD_SPLIT_TRAIN, tr[run], &ntr);
        val_ids(ds, VD_SPLIT_TEST, va[run], &nva);
        ck_assert_int_eq(ntr, 24);
        ck_assert_int_eq(nva, 6);
        /* a second hold-out: the data set has a test split now */
        ck_assert_int_eq(vd_data_hold_out(ds, 0.2, &e), VD_EUSAGE);
        vd_data_close(&ds);
    }
    ck_assert_mem_eq(tr[0], tr[1], sizeof tr[0]);   /* the same seed: the same splits */
    ck_assert_mem_eq(va[0], va[1], sizeof va[0]);
    int seen[30] = { 0 };
    for (int i = 0; i < 24; i++) seen[tr[0][i]]++;
    for (int i = 0; i < 6; i++) seen[va[0][i]]++;
    for (int i = 0; i < 30; i++) ck_assert_msg(seen[i] == 1, "image %d in %d splits", i, seen[i]);
    /* each split in the folder's order: class a/ (images 0, 3, ...), b/, c/ */
#define POS(id) ((id) % 3 * 10 + (id) / 3)
    for (int i = 1; i < 6; i++) ck_assert_int_lt(POS(va[0][i - 1]), POS(va[0][i]));
    for (int i = 1; i < 24; i++) ck_assert_int_lt(POS(tr[0][i - 1]), POS(tr[0][i]));
#undef POS
    /* another seed, another choice; F = 0.5: 15 each */
    vd_dataset *ds;
    ck_assert_int_eq(vd_data_open(spec, &net, 2, 6, false, &ds, &e), 0);
    ck_assert_int_eq(vd_data_hold_out(ds, 0.5, &e), 0);
    int other[30];
    val_ids(ds, VD_SPLIT_TEST, other, &nva);
    ck_assert_int_eq(nva, 15);
    ck_assert(memcmp(other, va[0], 6 * sizeof(int)) != 0);
    vd_data_close(&ds);
    /* the bad uses */
    ck_assert_int_eq(vd_data_open(spec, &net, 2, 5, false, &ds, &e), 0);
    ck_assert_int_eq(vd_data_hold_out(ds, 0, &e), VD_EUSAGE);
    ck_assert_int_eq(vd_data_hold_out(ds, 1, &e), VD_EUSAGE);
    ck_assert_int_eq(vd_data_hold_out(ds, 0.01, &e), VD_EUSAGE);   /* 0.3 images: none */
    ck_assert_msg(strstr(e.msg, "each split needs at least one image"), "%s", e.msg);
    ck_assert_int_eq(vd_data_hold_out(ds, 0.99, &e), VD_EUSAGE);   /* 29.7: none left */
    vd_data_close(&ds);
    char p[600];   /* a val/ directory beside train/ */
    snprintf(p, sizeof p, "%s/val", d);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/val/a", d);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/val/a/v.pgm", d);
    tu_write(p, "P5\n4 4\n255\n0123456789abcdef", 27);
    ck_assert_int_eq(vd_data_open(spec, &net, 2, 5, false, &ds, &e), 0);
    ck_assert_int_eq(vd_data_hold_out(ds, 0.2, &e), VD_EUSAGE);
    ck_assert_msg(strstr(e.msg, "its val/ directory"), "%s", e.msg);
    vd_data_close(&ds);
    ck_assert_int_eq(vd_data_open("synthetic:20,5", &net, 2, 5, false, &ds, &e), 0);
    ck_assert_int_eq(vd_data_hold_out(ds, 0.2, &e), VD_EUSAGE);
    ck_assert_msg(strstr(e.msg, "has a held-out split of its own"), "%s", e.msg);
    vd_data_close(&ds);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* An evaluation loader (pad): the batches wrap as always, and the samples
 * past the split's end are labelled VD_LABEL_PAD, on the host and described
 * for the device alike: 90 images at batch 32 leave 6 padded at the end. */
START_TEST(loader_pads_the_last_batch) {
    vd_net net;
    tu_tiny_net(&net, 1, 4, 4, 10, false, 32);
    vd_dataset *ds;
    vd_err e;
    ck_assert_int_eq(vd_data_open("synthetic:64,90", &net, 32, 3, false, &ds, &e), 0);
    for (int dev = 0; dev < 2; dev++) {
        vd_loader *ld;
        vd_loader_cfg cfg = { .split = VD_SPLIT_TEST, .batch = 32, .seed = 3, .threads = 2,
                              .pad = true, .synth_device = dev };
        ck_assert_int_eq(vd_loader_create(&ld, ds, &cfg, &e), 0);
        float x[32 * 16];
        int32_t y[32];
        int64_t idx[32];
        int scored = 0;
        for (int b = 0; b < 3; b++) {
            vd_synth_batch sb = { .index = idx };
            int rc = dev ? vd_loader_next_synth(ld, &sb, y, &e) : vd_loader_next(ld, x, y, &e);
            ck_assert_int_eq(rc, 0);
            for (int i = 0; i < 32; i++) {
                bool pad = b * 32 + i >= 90;
                ck_assert_msg((y[i] == VD_LABEL_PAD) == pad, "batch %d sample %d: label %d", b, i,
                              (int)y[i]);
                scored += !pad;
                if (dev) ck_assert_int_eq(idx[i], (b * 32 + i) % 90);   /* the first again */
            }
        }
        ck_assert_int_eq(scored, 90);
        vd_loader_destroy(&ld);
    }
    vd_data_close(&ds);
    vd_net_free(&net);
}
END_TEST

START_TEST(epoch_perm_is_a_permutation) {
    int64_t p[1000], q[1000];
    vd_data_epoch_perm(1000, 5, 0, p);
    int seen[1000] = { 0 };
    for (int i = 0; i < 1000; i++) { ck_assert(p[i] >= 0 && p[i] < 1000); seen[p[i]]++; }
    for (int i = 0; i < 1000; i++) ck_assert_int_eq(seen[i], 1);
    vd_data_epoch_perm(1000, 5, 0, q);
    ck_assert_mem_eq(p, q, sizeof p);
    vd_data_epoch_perm(1000, 5, 1, q);
    ck_assert(memcmp(p, q, sizeof p) != 0);
    vd_data_epoch_perm(1000, 6, 0, q);
    ck_assert(memcmp(p, q, sizeof p) != 0);
}
END_TEST

/* Run a loader for nb batches and return all pixel-0 values (sample ids). */
static void run_loader(vd_dataset *ds, int batch, bool shuffle, uint64_t start, int threads,
                       int nb, int *ids, int32_t *labels) {
    vd_loader *ld;
    vd_err e;
    vd_loader_cfg cfg = { .split = VD_SPLIT_TRAIN, .batch = batch, .shuffle = shuffle,
                          .seed = 9, .start = start, .threads = threads };
    ck_assert_msg(vd_loader_create(&ld, ds, &cfg, &e) == 0, "%s", e.msg);
    float *x = malloc(sizeof(float) * 784 * (size_t)batch);
    for (int b = 0; b < nb; b++) {
        ck_assert_int_eq(vd_loader_position(ld), start + (uint64_t)b * (uint64_t)batch);
        ck_assert_int_eq(vd_loader_next(ld, x, labels + b * batch, &e), 0);
        for (int i = 0; i < batch; i++)
            ids[b * batch + i] = (int)lroundf((x[i * 784] * 0.3081f + 0.1307f) * 255.0f);
    }
    free(x);
    vd_loader_destroy(&ld);
    ck_assert_ptr_null(ld);
}

START_TEST(loader_order_is_deterministic) {
    char *d = vdt_make_mnist(50, 5);   /* sample i has pixel 0 == i */
    vd_net net;
    tu_tiny_net(&net, 1, 28, 28, 10, false, 4);
    vd_dataset *ds;
    vd_err e;
    ck_assert_int_eq(open_spec("mnist", d, &net, &ds, &e), 0);
    enum { B = 7, NB = 30 };      /* 210 samples: 4.2 epochs, batches straddle epochs */
    int a[B * NB], b[B * NB], c[B * NB];
    int32_t la[B * NB], lb[B * NB], lc[B * NB];
    run_loader(ds, B, true, 0, 1, NB, a, la);
    run_loader(ds, B, true, 0, 3, NB, b, lb);
    ck_assert_mem_eq(a, b, sizeof a);                 /* thread count does not matter */
    ck_assert_mem_eq(la, lb, sizeof la);
    for (int i = 0; i < B * NB; i++) ck_assert_int_eq(la[i], a[i] % 10);
    for (int ep = 0; ep < 4; ep++) {                  /* each epoch is a permutation */
        int seen[50] = { 0 };
        for (int i = 0; i < 50; i++) seen[a[ep * 50 + i]]++;
        for (int i = 0; i < 50; i++) ck_assert_int_eq(seen[i], 1);
    }
    ck_assert(memcmp(a, a + 50, 50 * sizeof(int)) != 0);   /* reshuffled per epoch */
    run_loader(ds, B, true, 5 * B, 2, NB - 5, c, lc);        /* resume at batch 5 */
    ck_assert_mem_eq(a + 5 * B, c, sizeof(int) * B * (NB - 5));
    run_loader(ds, B, false, 3, 1, 2, c, lc);                /* in order, from sample 3 */
    for (int i = 0; i < 2 * B; i++) ck_assert_int_eq(c[i], 3 + i);
    vd_data_close(&ds);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- JPEG: TurboJPEG against stb_image, scaled decoding, bad files --------- */

/* Pixels of a test image: smooth (low-frequency waves only) or textured
 * (plus +-16 of per-pixel hash noise, as in photos). */
static void test_pixels(unsigned char *px, int w, int h, bool texture) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t z = (uint32_t)(y * 7919 + x) * 2654435761u;
            z ^= z >> 15;
            for (int c = 0; c < 3; c++) {
                double v = 120 + 60 * sin(x * 0.011 * (c + 1)) * cos(y * 0.017) + 50.0 * y / h +
                           (texture ? (double)((int)((z >> (5 * c)) & 31) - 16) : 0.0);
                px[((size_t)y * w + x) * 3 + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

/* Write a w x h JPEG of test_pixels at quality q with chroma subsampling samp;
 * returns its size. */
/* A w x h JPEG into *out (malloc'ed; its size returned); flags: TJFLAG_*. */
static unsigned long make_jpeg(unsigned char **out, int w, int h, bool texture, int q, int samp,
                               int flags) {
    unsigned char *px = malloc((size_t)w * h * 3), *jpg = NULL;
    ck_assert_ptr_nonnull(px);
    test_pixels(px, w, h, texture);
    tjhandle tj = tjInitCompress();
    unsigned long n = 0;
    ck_assert_int_eq(tjCompress2(tj, px, w, 0, h, TJPF_RGB, &jpg, &n, samp, q, flags), 0);
    *out = malloc(n);
    ck_assert_ptr_nonnull(*out);
    memcpy(*out, jpg, n);
    tjFree(jpg);
    tjDestroy(tj);
    free(px);
    return n;
}

static unsigned long write_jpeg(const char *path, int w, int h, bool texture, int q, int samp) {
    unsigned char *jpg;
    unsigned long n = make_jpeg(&jpg, w, h, texture, q, samp, 0);
    tu_write(path, jpg, n);
    free(jpg);
    return n;
}

/* max and mean |a - b| over n bytes */
static void byte_diff(const unsigned char *a, const unsigned char *b, size_t n, int *max,
                      double *mean) {
    long sum = 0;
    *max = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        sum += d;
        if (d > *max) *max = d;
    }
    *mean = (double)sum / (double)n;
}

START_TEST(jpeg_turbo_matches_stb) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    snprintf(p, sizeof p, "%s/a.jpg", d);
    /* libjpeg-turbo (accurate integer IDCT, "fancy" triangular chroma
     * upsampling) and stb_image (its own integer IDCT and chroma
     * upsampling, other YCbCr->RGB rounding) decode the same file to
     * slightly different pixels: both IDCTs are within the JPEG standard's
     * accuracy (about +-1 per sample), and the colour conversion rounds
     * differently, so allow 4 levels per byte (of 255) and a mean of 0.25
     * for full-resolution chroma (4:4:4; measured: 3 and 0.03). With 4:2:0
     * the two also upsample the half-resolution chroma planes with slightly
     * different filters: allow 6 levels and a mean of 0.5 (measured: 3 and
     * 0.09). A decoder bug - a shifted block, a swapped plane - gives tens of
     * levels over the whole image. */
    static const struct { int samp, max; double mean; } cases[] = {
        { TJSAMP_444, 4, 0.25 }, { TJSAMP_420, 6, 0.5 },
    };
    for (size_t k = 0; k < VD_ARRAY_LEN(cases); k++) {
        write_jpeg(p, 160, 120, true, 90, cases[k].samp);
        vd_image a, b;
        vd_err e;
        ck_assert_msg(vd_image_load(p, 3, 8, 8, VD_JPEG_TURBO_FULL, &a, &e) == 0, "%s", e.msg);
        ck_assert_msg(vd_image_load(p, 3, 8, 8, VD_JPEG_STB, &b, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(a.w, 160);
        ck_assert_int_eq(a.h, 120);
        ck_assert_int_eq(b.w, 160);
        ck_assert_int_eq(a.scale_denom, 1);
        int mx;
        double mean;
        byte_diff(a.px, b.px, 160 * 120 * 3, &mx, &mean);
        fprintf(stderr, "turbo vs stb samp %d: max %d mean %.3f\n", cases[k].samp, mx, mean);
        ck_assert_msg(mx <= cases[k].max && mean <= cases[k].mean,
                      "subsampling %d: max %d mean %.3f", cases[k].samp, mx, mean);
        vd_image_free(&a);
        vd_image_free(&b);
        /* the grey path: one channel each */
        ck_assert_int_eq(vd_image_load(p, 1, 8, 8, VD_JPEG_TURBO_FULL, &a, &e), 0);
        ck_assert_int_eq(vd_image_load(p, 1, 8, 8, VD_JPEG_STB, &b, &e), 0);
        byte_diff(a.px, b.px, 160 * 120, &mx, &mean);
        fprintf(stderr, "turbo vs stb grey samp %d: max %d mean %.3f\n", cases[k].samp, mx, mean);
        ck_assert_msg(mx <= cases[k].max && mean <= cases[k].mean,
                      "grey, subsampling %d: max %d mean %.3f", cases[k].samp, mx, mean);
        vd_image_free(&a);
        vd_image_free(&b);
    }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(jpeg_scaled_decode_matches_full) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    const char *dirs[] = { "train", "train/a" };
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", d, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof p, "%s/train/a/big.jpg", d);
    write_jpeg(p, 1024, 768, false, 95, TJSAMP_444);
    /* the scale: a 64x64 input's centre box of 1024x768 is 0.875 * 768 = 672
     * pixels square, so 1/8 (84 of them) still holds 64; 1/16 does not
     * exist, 1/4 is larger */
    vd_image im;
    vd_err e;
    ck_assert_int_eq(vd_image_load(p, 3, 64, 64, VD_JPEG_TURBO, &im, &e), 0);
    ck_assert_int_eq(im.scale_denom, 8);
    ck_assert_int_eq(im.w, 128);
    ck_assert_int_eq(im.h, 96);
    ck_assert_int_eq(im.full_w, 1024);
    ck_assert_int_eq(im.full_h, 768);
    vd_image_free(&im);
    /* 200x200 input: the box needs 1/2 (336 pixels), not 1/4 (168) */
    ck_assert_int_eq(vd_image_load(p, 3, 200, 200, VD_JPEG_TURBO, &im, &e), 0);
    ck_assert_int_eq(im.scale_denom, 2);
    vd_image_free(&im);
    /* 500x500: no reduction */
    ck_assert_int_eq(vd_image_load(p, 3, 500, 500, VD_JPEG_TURBO, &im, &e), 0);
    ck_assert_int_eq(im.scale_denom, 1);
    vd_image_free(&im);

    /* the samples (the centre box, and augmented: RandomResizedCrop's boxes
     * + flips, decoded at 1/2 to 1/8 by their size) from the scaled decode
     * equal those from the full decode within 6 levels of 255 and a mean of
     * 1.5: on a smooth image the DCT-domain reduction (each output pixel ~
     * the mean of its 8x8 block) and the area averaging of the full decode
     * both follow the same smooth surface; what remains is the waves'
     * curvature within a block and the decoders' and the 8-bit resampling's
     * rounding (measured: max 3, mean 0.44). A box one scaled pixel off
     * gives max 18, mean 4 here. */
    char spec[700];
    snprintf(spec, sizeof spec, "folder:%s", d);
    static const float sd[3] = { 0.229f, 0.224f, 0.225f };
    for (int aug = 0; aug < 2; aug++) {
        vd_net net;
        tu_tiny_net(&net, 3, 64, 64, 10, false, 2);
        vd_dataset *full, *scaled;
        ck_assert_msg(vd_data_open(spec, &net, 2, 3, aug, &full, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(vd_data_open(spec, &net, 2, 3, aug, &scaled, &e), 0);
        ck_assert_int_eq(vd_data_set_jpeg_decoder(full, VD_JPEG_TURBO_FULL, &e), 0);
        float xf[3 * 64 * 64], xs[3 * 64 * 64];
        for (uint64_t key = 0; key < (aug ? 6u : 1u); key++) {
            int32_t yf, ys;
            ck_assert_int_eq(vd_data_sample(full, VD_SPLIT_TRAIN, 0, key, xf, &yf, &e), 0);
            ck_assert_int_eq(vd_data_sample(scaled, VD_SPLIT_TRAIN, 0, key, xs, &ys, &e), 0);
            double mx = 0, sum = 0;
            for (int c = 0; c < 3; c++)
                for (int k = 0; k < 64 * 64; k++) {
                    double dv = fabs((double)xf[c * 4096 + k] - xs[c * 4096 + k]) * sd[c] * 255;
                    sum += dv;
                    if (dv > mx) mx = dv;
                }
            fprintf(stderr, "scaled vs full aug %d key %d: max %.2f mean %.3f\n", aug, (int)key,
                    mx, sum / (3 * 4096));
            ck_assert_msg(mx <= 6 && sum / (3 * 4096) <= 1.5, "augment %d key %d: max %.2f "
                          "mean %.3f levels", aug, (int)key, mx, sum / (3 * 4096));
        }
        vd_data_close(&full);
        vd_data_close(&scaled);
        vd_net_free(&net);
    }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* A file that starts as a JPEG and then is garbage: the data set does not
 * open, naming it. A valid JPEG cut short: VD_EDATA naming it as a truncated
 * JPEG, directly and through the loader (whatever the thread count). */
START_TEST(jpeg_bad_files_are_named) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    const char *dirs[] = { "train", "train/a" };
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", d, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0755), 0);
    }
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/train/a/good%d.jpg", d, i);
        write_jpeg(p, 40, 30, true, 90, TJSAMP_420);
    }
    snprintf(p, sizeof p, "%s/train/a/x_bad.jpg", d);
    static const unsigned char bad[] = { 0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J', 'F', 'I', 'F',
                                         0x00, 0x01, 0x01, 0x00, 0x13, 0x37, 0xDE, 0xAD };
    tu_write(p, bad, sizeof bad);
    /* cut a valid JPEG short, keeping the headers (about 600 bytes) */
    snprintf(p, sizeof p, "%s/train/a/y_trunc.jpg", d);
    unsigned long n = write_jpeg(p, 160, 120, true, 90, TJSAMP_420);
    ck_assert_int_gt(n, 4000);
    ck_assert_int_eq(truncate(p, (off_t)(n / 2)), 0);
    char cut[600];
    snprintf(cut, sizeof cut, "%s", p);
    vd_net net;
    tu_tiny_net(&net, 3, 16, 16, 10, false, 7);
    char spec[700];
    snprintf(spec, sizeof spec, "folder:%s", d);
    vd_dataset *ds;
    vd_err e;
    /* the garbage JPEG's header cannot be read: the data set does not open
     * (every image's header is checked at open), whichever decoder follows */
    ck_assert_int_eq(vd_data_open(spec, &net, 7, 1, false, &ds, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "train/a/x_bad.jpg"), "%s", e.msg);
    snprintf(p, sizeof p, "%s/train/a/x_bad.jpg", d);
    ck_assert_int_eq(unlink(p), 0);
    /* the cut JPEG (headers whole, no end-of-image marker) is refused at
     * open too (every image is checked against its own length) */
    ck_assert_int_eq(vd_data_open(spec, &net, 7, 1, false, &ds, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "train/a/y_trunc.jpg: truncated JPEG: no end-of-image marker"),
                  "%s", e.msg);
    /* a file cut after the data set opened fails when decoded, naming it */
    for (int dec = 0; dec < 2; dec++) {
        write_jpeg(cut, 160, 120, true, 90, TJSAMP_420);
        ck_assert_msg(vd_data_open(spec, &net, 7, 1, false, &ds, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(truncate(cut, (off_t)(n / 2)), 0);
        if (dec) ck_assert_int_eq(vd_data_set_jpeg_decoder(ds, VD_JPEG_STB, &e), 0);
        float x[7 * 768];
        int32_t y[7];
        for (int i = 0; i < 5; i++)
            ck_assert_msg(vd_data_sample(ds, VD_SPLIT_TRAIN, i, 0, x, y, &e) == 0, "%s", e.msg);
        float x4[768];
        memcpy(x4, x, sizeof x4);      /* sample 4 */
        /* the length check before either decoder refuses it */
        ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, 5, 0, x, y, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, "train/a/y_trunc.jpg: truncated JPEG"), "decoder %d: %s",
                      dec, e.msg);
        /* the next sample after a failure decodes as before (the
         * sample's scratch is reused; its decoder is made per image) */
        ck_assert_msg(vd_data_sample(ds, VD_SPLIT_TRAIN, 4, 0, x, y, &e) == 0, "%s", e.msg);
        ck_assert_mem_eq(x, x4, sizeof x4);
        for (int threads = 1; threads <= 4; threads += 3) {
            vd_loader *ld;
            vd_loader_cfg cfg = { .split = VD_SPLIT_TRAIN, .batch = 6, .shuffle = false,
                                  .seed = 1, .threads = threads };
            ck_assert_int_eq(vd_loader_create(&ld, ds, &cfg, &e), 0);
            memset(&e, 0, sizeof e);
            ck_assert_int_eq(vd_loader_next(ld, x, y, &e), VD_EDATA);
            ck_assert_msg(strstr(e.msg, "y_trunc.jpg"), "threads %d: %s", threads, e.msg);
            vd_loader_destroy(&ld);
        }
        vd_data_close(&ds);
    }
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* Load the PNM bytes b[0..n) as C channels: *w x *h pixels into px; the rc. */
static int load_pnm(const char *dir, const void *b, size_t n, int C, int *w, int *h,
                    unsigned char *px, size_t max, vd_err *e) {
    char p[600];
    snprintf(p, sizeof p, "%s/img.pgm", dir);
    tu_write(p, b, n);
    vd_image im;
    int rc = vd_image_check_header(p, w, h, e);
    if (rc) return rc;
    rc = vd_image_load(p, C, 4, 4, VD_JPEG_TURBO, &im, e);
    if (rc) return rc;
    ck_assert_int_eq(im.w, *w);
    ck_assert_int_eq(im.h, *h);
    size_t sz = (size_t)im.w * (size_t)im.h * (size_t)C;
    ck_assert_uint_le(sz, max);
    memcpy(px, im.px, sz);
    vd_image_free(&im);
    return VD_OK;
}

/* Binary PGM / PPM (fuzz_image found these in stb_image 2.27, Debian's
 * libstb, which decoded them before): samples of two bytes are big-endian
 * (stb read them in host order, taking the low byte); samples scale by
 * maxval; a 16-bit file decodes to the other channel count too (stb
 * converted the channels as if the samples were bytes, then read past its
 * buffer); a file whose samples are cut short, or a sample above maxval, is
 * corrupt (stb returned uninitialised memory as the pixels of a cut file). */
START_TEST(pnm_depth_scale_and_truncation) {
    char *d = vdt_tmpdir("vdnn-train-test");
    vd_err e;
    int w, h;
    unsigned char px[64];
    /* 16 bits: 0x1234 -> round(4660 * 255 / 65535) = 18, 0xabcd -> 171 */
    static const char g16[] = "P5\n2 1\n65535\n\x12\x34\xab\xcd";
    ck_assert_msg(load_pnm(d, g16, sizeof g16 - 1, 1, &w, &h, px, sizeof px, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(w, 2);
    ck_assert_int_eq(h, 1);
    ck_assert_int_eq(px[0], 18);
    ck_assert_int_eq(px[1], 171);
    ck_assert_msg(load_pnm(d, g16, sizeof g16 - 1, 3, &w, &h, px, sizeof px, &e) == 0, "%s", e.msg);
    static const unsigned char g16_rgb[6] = { 18, 18, 18, 171, 171, 171 };
    ck_assert_mem_eq(px, g16_rgb, 6);
    /* 16-bit RGB (65535, 32768, 0) = (255, 128, 0) -> luma (77 r + 150 g + 29 b) >> 8 */
    static const char c16[] = "P6 1 1 65535 \xff\xff\x80\x00\x00\x00";
    ck_assert_msg(load_pnm(d, c16, sizeof c16 - 1, 1, &w, &h, px, sizeof px, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(px[0], (77 * 255 + 150 * 128) >> 8);
    ck_assert_msg(load_pnm(d, c16, sizeof c16 - 1, 3, &w, &h, px, sizeof px, &e) == 0, "%s", e.msg);
    static const unsigned char c16_rgb[3] = { 255, 128, 0 };
    ck_assert_mem_eq(px, c16_rgb, 3);
    /* maxval 15 with a comment: 15 -> 255, 5 -> 85, 0 -> 0 */
    static const char g4[] = "P5 3 # three\n1 15\n\x0f\x05\x00";
    ck_assert_msg(load_pnm(d, g4, sizeof g4 - 1, 1, &w, &h, px, sizeof px, &e) == 0, "%s", e.msg);
    static const unsigned char g4_px[3] = { 255, 85, 0 };
    ck_assert_mem_eq(px, g4_px, 3);
    /* cut short: 2 of 16 samples; one byte of a 16-bit sample. The header
     * check (at open) already says so. */
    static const char cut[] = "P5 4 4 255\n\x01\x02";
    ck_assert_int_eq(load_pnm(d, cut, sizeof cut - 1, 1, &w, &h, px, sizeof px, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.pgm: truncated"), "%s", e.msg);
    char p[600];
    snprintf(p, sizeof p, "%s/img.pgm", d);
    vd_image im;
    ck_assert_int_eq(vd_image_load(p, 1, 4, 4, VD_JPEG_TURBO, &im, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.pgm: truncated"), "%s", e.msg);
    ck_assert_int_eq(load_pnm(d, g16, sizeof g16 - 2, 3, &w, &h, px, sizeof px, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.pgm: truncated"), "%s", e.msg);
    /* a sample above maxval */
    static const char big[] = "P5 1 1 100\n\x65";
    ck_assert_int_eq(load_pnm(d, big, sizeof big - 1, 1, &w, &h, px, sizeof px, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.pgm: ") && strstr(e.msg, "maxval"), "%s", e.msg);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* Only JPEG, PNG, BMP, PPM and PGM are decoded, by their first bytes
 * (stb_image, which decodes PNG and BMP, reads GIF, PSD, TGA, HDR and PIC
 * too: a GIF named .png was a training image). A PNG chunk must fit in the
 * file (at open and before decoding). A JPEG Huffman table (DHT)
 * of more than 256 codes is corrupt: stb_image 2.27 (Debian's libstb)
 * copies it into arrays of 256 unchecked, overwriting its decoder's state,
 * in stbi_info (the header check at open) before the frame header and in
 * the decode (--jpeg stb) after it too. So is a scan that reads a Huffman
 * table never defined (stb_image reads past its arrays). fuzz_image found
 * both. Valid JPEGs, progressive ones with tables between their scans,
 * still decode with stb_image. */
START_TEST(image_kinds_and_stb_guards) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    snprintf(p, sizeof p, "%s/img.png", d);
    vd_err e;
    vd_image im;
    int w, h;
    static const unsigned char gif[] = {
        'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0x80, 0, 0, 0xFF, 0xFF, 0xFF, 0, 0, 0,
        0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 1, 0, 0x3B };
    tu_write(p, gif, sizeof gif);
    ck_assert_int_eq(vd_image_check_header(p, &w, &h, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.png: not a JPEG, PNG, BMP, PPM or PGM"), "%s", e.msg);
    ck_assert_int_eq(vd_image_load(p, 3, 4, 4, VD_JPEG_TURBO, &im, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.png: not a JPEG, PNG, BMP, PPM or PGM"), "%s", e.msg);

    /* a PNG chunk longer than the file: refused before stb_image, which
     * would first grow its buffer to the length claimed (here 2 GiB) */
    static const unsigned char png[] = {
        0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A,
        0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 4, 0, 0, 0, 4, 8, 2, 0, 0, 0, 0, 0, 0, 0,
        0x7F, 0xFF, 0xFF, 0xF0, 'I', 'D', 'A', 'T', 0x78, 0xDA, 0x63, 0x60, 0, 0, 0, 0,
        0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82 };
    tu_write(p, png, sizeof png);
    ck_assert_int_eq(vd_image_check_header(p, &w, &h, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.png: truncated or corrupt PNG: a chunk of 2147483632 bytes"),
                  "%s", e.msg);
    ck_assert_int_eq(vd_image_load(p, 3, 4, 4, VD_JPEG_TURBO, &im, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.png: truncated or corrupt PNG: a chunk of 2147483632 bytes"),
                  "%s", e.msg);

    /* a DHT before the frame: 16 lengths of 255 codes each (4080) */
    unsigned char bad[4 + 2 + 17 + 4080] = { 0xFF, 0xD8, 0xFF, 0xC4, (4080 + 19) >> 8,
                                              (4080 + 19) & 255, 0x00 };
    memset(bad + 7, 255, 16);
    snprintf(p, sizeof p, "%s/img.jpg", d);
    /* then a scan header (SOS) and the end-of-image marker: its lengths are
     * whole, only the table is wrong */
    static const unsigned char sos_eoi[] = { 0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 0x3F, 0, 0xFF, 0xD9 };
    unsigned char bad_whole[sizeof bad + sizeof sos_eoi];
    memcpy(bad_whole, bad, sizeof bad);
    memcpy(bad_whole + sizeof bad, sos_eoi, sizeof sos_eoi);
    tu_write(p, bad_whole, sizeof bad_whole);
    ck_assert_int_eq(vd_image_check_header(p, &w, &h, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.jpg: corrupt JPEG: a Huffman table (DHT)"), "%s", e.msg);
    /* without them it is a JPEG cut after its tables */
    tu_write(p, bad, sizeof bad);
    ck_assert_int_eq(vd_image_check_header(p, &w, &h, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "img.jpg: truncated JPEG: the file ends after 4103 bytes, before "
                         "its image data"), "%s", e.msg);

    /* valid: baseline and progressive, through the header check and stb */
    for (int prog = 0; prog < 2; prog++) {
        unsigned char *jpg;
        unsigned long n = make_jpeg(&jpg, 40, 24, true, 90, TJSAMP_420,
                                    prog ? TJFLAG_PROGRESSIVE : 0);
        tu_write(p, jpg, n);
        ck_assert_msg(vd_image_check_header(p, &w, &h, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(w, 40);
        ck_assert_int_eq(h, 24);
        ck_assert_msg(vd_image_load(p, 3, 24, 40, VD_JPEG_STB, &im, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(im.w, 40);
        vd_image_free(&im);
        /* the same table after the scan, before EOI: the header is fine, stb
         * would read the table on decoding */
        if (!prog) {
            unsigned char *j2 = malloc(n + sizeof bad);
            ck_assert_ptr_nonnull(j2);
            memcpy(j2, jpg, n - 2);
            memcpy(j2 + n - 2, bad + 2, sizeof bad - 2);
            j2[n + sizeof bad - 4] = 0xFF;
            j2[n + sizeof bad - 3] = 0xD9;
            tu_write(p, j2, n + sizeof bad - 2);
            free(j2);
            ck_assert_msg(vd_image_check_header(p, &w, &h, &e) == 0, "%s", e.msg);
            ck_assert_int_eq(vd_image_load(p, 3, 24, 40, VD_JPEG_STB, &im, &e), VD_EDATA);
            ck_assert_msg(strstr(e.msg, "img.jpg: corrupt JPEG: a Huffman table"), "%s", e.msg);
            /* a scan that reads Huffman tables 3, never defined (stb_image
             * decodes with their uninitialised limits and reads past them) */
            unsigned long k = 2;
            while (k + 6 < n && !(jpg[k] == 0xFF && jpg[k + 1] == 0xDA)) k++;
            ck_assert_uint_lt(k + 6, n);
            jpg[k + 6] = 0x33;      /* FF DA, length, count, id, tables */
            tu_write(p, jpg, n);
            ck_assert_msg(vd_image_check_header(p, &w, &h, &e) == 0, "%s", e.msg);
            ck_assert_int_eq(vd_image_load(p, 3, 24, 40, VD_JPEG_STB, &im, &e), VD_EDATA);
            ck_assert_msg(strstr(e.msg, "img.jpg: corrupt JPEG: a scan reads a Huffman table "
                                 "that is not defined"), "%s", e.msg);
        }
        free(jpg);
    }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* Take nb batches from a fresh loader; x [nb*batch*floats], y [nb*batch]. */
static void take_batches(vd_dataset *ds, int batch, int threads, int nb, float *x, int32_t *y) {
    const vd_data_info *in = vd_data_get_info(ds);
    size_t fl = (size_t)in->c * in->h * in->w * (size_t)batch;
    vd_loader *ld;
    vd_err e;
    vd_loader_cfg cfg = { .split = VD_SPLIT_TRAIN, .batch = batch, .shuffle = true,
                          .seed = 11, .start = 3, .threads = threads };
    ck_assert_msg(vd_loader_create(&ld, ds, &cfg, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(vd_loader_threads(ld), threads);
    for (int b = 0; b < nb; b++)
        ck_assert_msg(vd_loader_next(ld, x + b * fl, y + b * batch, &e) == 0, "%s", e.msg);
    vd_loader_destroy(&ld);
}

/* The same seed gives the same batches, bytes and labels, with 1, 2, 5 or
 * 16 loader threads (chunked work, several slots in flight): synthetic
 * data, and JPEG folders with random crops and flips. */

/* A temporary folder of 12 RGB JPEGs in classes a and b (train/), 4 pixels
 * wider each, 40 + hstep * (i % 5) high; the caller removes it. */
static char *jpeg_folder12(int hstep) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    const char *dirs[] = { "train", "train/a", "train/b" };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", d, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0755), 0);
    }
    for (int i = 0; i < 12; i++) {
        snprintf(p, sizeof p, "%s/train/%c/%02d.jpg", d, i % 2 ? 'b' : 'a', i);
        write_jpeg(p, 48 + 4 * i, 40 + hstep * (i % 5), true, 90, TJSAMP_420);
    }
    return d;
}

START_TEST(loader_same_batches_any_thread_count) {
    enum { NB = 6 };
    static const int threads[] = { 1, 2, 5, 16 };
    vd_net net;
    vd_err e;
    /* synthetic, batch 10 (chunks of 1..3 samples) */
    tu_tiny_net(&net, 3, 8, 8, 10, false, 10);
    vd_dataset *ds;
    ck_assert_int_eq(vd_data_open("synthetic:50", &net, 10, 5, false, &ds, &e), 0);
    size_t n = (size_t)NB * 10 * 192;     /* the folder part below needs NB * 5 * 768 */
    float *ref = malloc(sizeof(float) * NB * 5 * 768), *x = malloc(sizeof(float) * NB * 5 * 768);
    int32_t ly[NB * 10], y[NB * 10];
    take_batches(ds, 10, 1, NB, ref, ly);
    for (size_t t = 1; t < VD_ARRAY_LEN(threads); t++) {
        take_batches(ds, 10, threads[t], NB, x, y);
        ck_assert_mem_eq(ref, x, sizeof(float) * n);
        ck_assert_mem_eq(ly, y, sizeof ly);
    }
    vd_data_close(&ds);
    vd_net_free(&net);
    /* a batch large enough (200 x 3x64x64 floats, 9.8 MB) to be copied out
     * in parallel parts with 4 threads: equal to the samples read one by one
     * (batch 1 of an unshuffled loader from counter 0 = samples 200..399) */
    tu_tiny_net(&net, 3, 64, 64, 10, false, 200);
    ck_assert_int_eq(vd_data_open("synthetic:1000", &net, 200, 5, false, &ds, &e), 0);
    {
        size_t fl = (size_t)200 * 3 * 64 * 64;
        float *big = malloc(sizeof(float) * fl), *one = malloc(sizeof(float) * 3 * 64 * 64);
        int32_t by[200], oy;
        vd_loader *ld;
        vd_loader_cfg cfg = { .split = VD_SPLIT_TRAIN, .batch = 200, .shuffle = false,
                              .seed = 5, .threads = 4 };
        ck_assert_int_eq(vd_loader_create(&ld, ds, &cfg, &e), 0);
        ck_assert_int_eq(vd_loader_next(ld, big, by, &e), 0);
        ck_assert_int_eq(vd_loader_next(ld, big, by, &e), 0);
        vd_loader_destroy(&ld);
        for (int i = 0; i < 200; i++) {
            ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, 200 + i, 0, one, &oy, &e), 0);
            ck_assert_int_eq(by[i], oy);
            ck_assert_mem_eq(big + (size_t)i * 3 * 64 * 64, one, sizeof(float) * 3 * 64 * 64);
        }
        free(big);
        free(one);
    }
    vd_data_close(&ds);
    vd_net_free(&net);
    /* a JPEG folder, augmented: 12 images, batch 5 (epochs straddled) */
    char *d = jpeg_folder12(0);
    tu_tiny_net(&net, 3, 16, 16, 10, false, 5);
    char spec[700];
    snprintf(spec, sizeof spec, "folder:%s", d);
    ck_assert_int_eq(vd_data_open(spec, &net, 5, 5, true, &ds, &e), 0);
    n = (size_t)NB * 5 * 768;
    take_batches(ds, 5, 1, NB, ref, ly);
    for (size_t t = 1; t < VD_ARRAY_LEN(threads); t++) {
        take_batches(ds, 5, threads[t], NB, x, y);
        ck_assert_mem_eq(ref, x, sizeof(float) * n);
        ck_assert_mem_eq(ly, y, sizeof(int32_t) * NB * 5);
    }
    vd_data_close(&ds);
    vd_net_free(&net);
    free(ref);
    free(x);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* vd_loader_next_as(dt = VD_DT_BF16 or VD_DT_F16) gives exactly
 * vd_f32_to_bf16 / vd_f32_to_f16 of the fp32 batch (vd_loader_next with 1 thread) in channels-last order, whatever the
 * thread count: the first batches (made in floats before the consumer's
 * first call) converted as they are copied, small batches in one copy and a
 * batch of 12.8 MB in 2 or 3 parallel parts (threads 2, and 3 and more:
 * COPY_PART_MIN 4 MiB), where each part converts its own range into the
 * half-size buffer; the later batches made in bf16 by the loader's threads
 * (a folder data set writes them itself, folder_sample_bf16; the others'
 * floats are converted per sample). nb batches in a row (slots reused, more
 * than the four of the ring: both kinds); nothing is written past the
 * batch. mixed: the consumer switches formats (dt, dt, alt, ...): a float
 * batch (alt F32) or one of the other 16-bit type after dt ones is that
 * batch too (made again). */
static void h16_batches_match(vd_dataset *ds, vd_dtype dt, int batch, int nb, size_t per,
                              bool mixed, vd_dtype alt) {
    static const int threads[] = { 1, 2, 3, 5, 16 };
    enum { GUARD = 16 };
    size_t n = per * (size_t)batch;
    float *ref = malloc(sizeof(float) * n * (size_t)nb);
    uint16_t *want = malloc(sizeof(uint16_t) * n), *got = malloc(sizeof(float) * (n + GUARD));
    int32_t *ly = malloc(sizeof(int32_t) * (size_t)(batch * nb)), *y = malloc(sizeof(int32_t) * (size_t)batch);
    ck_assert(ref && want && got && ly && y);
    vd_err e;
    vd_loader_cfg cfg = { .split = VD_SPLIT_TRAIN, .batch = batch, .shuffle = true,
                          .seed = 11, .start = 3, .threads = 1 };
    vd_loader *ld;
    ck_assert_msg(vd_loader_create(&ld, ds, &cfg, &e) == 0, "%s", e.msg);
    for (int b = 0; b < nb; b++)
        ck_assert_int_eq(vd_loader_next(ld, ref + (size_t)b * n, ly + b * batch, &e), 0);
    vd_loader_destroy(&ld);
    for (size_t t = 0; t < VD_ARRAY_LEN(threads); t++) {
        cfg.threads = threads[t];
        ck_assert_msg(vd_loader_create(&ld, ds, &cfg, &e) == 0, "%s", e.msg);
        for (int b = 0; b < nb; b++) {
            vd_dtype cur = !mixed || b % 3 != 2 ? dt : alt;
            const float *r = ref + (size_t)b * n;
            memset(got, 0xA5, sizeof(float) * (n + GUARD));
            ck_assert_msg(vd_loader_next_as(ld, got, cur, cur != VD_DT_F32, y, &e) == 0, "%s", e.msg);
            if (cur == VD_DT_F32) {
                ck_assert_msg(memcmp(got, r, sizeof(float) * n) == 0,
                              "threads %d batch %d: the float batch differs", threads[t], b);
                for (size_t i = 2 * n; i < 2 * (n + GUARD); i++)
                    ck_assert_msg(((uint16_t *)got)[i] == 0xA5A5u, "threads %d: written past "
                                  "the batch", threads[t]);
                ck_assert_mem_eq(y, ly + b * batch, sizeof(int32_t) * (size_t)batch);
                continue;
            }
            {   /* channels-last: element (i, ch, q) at (i*hw + q)*c + ch */
                const vd_data_info *di = vd_data_get_info(ds);
                size_t c = (size_t)di->c, hw = (size_t)di->h * (size_t)di->w;
                for (size_t i = 0; i < (size_t)batch; i++)
                    for (size_t ch = 0; ch < c; ch++)
                        for (size_t q = 0; q < hw; q++)
                            want[(i * hw + q) * c + ch] = vd_f32_to_h16(cur, r[(i * c + ch) * hw + q]);
            }
            uint16_t *g = (uint16_t *)got;
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(g[i] == want[i], "threads %d batch %d [%zu]: 0x%04x, want 0x%04x",
                              threads[t], b, i, g[i], want[i]);
            for (size_t i = n; i < 2 * (n + GUARD); i++)
                ck_assert_msg(g[i] == 0xA5A5u, "threads %d: written past the batch", threads[t]);
            ck_assert_mem_eq(y, ly + b * batch, sizeof(int32_t) * (size_t)batch);
        }
        vd_loader_destroy(&ld);
    }
    free(ref); free(want); free(got); free(ly); free(y);
}

/* Math tf32's batches: vd_loader_next_as(VD_DT_F32, nhwc true) gives the
 * float batch of vd_loader_next (1 thread) in channels-last order, bit for
 * bit, whatever the thread count (a large batch in parallel parts, each
 * relaying out whole samples) and after a bf16 batch (the batches are made
 * in bf16 by then: made again in floats, then relaid out); nothing is
 * written past the batch. */
static void f32_nhwc_batches_match(vd_dataset *ds, int batch, int nb) {
    static const int threads[] = { 1, 3, 16 };
    enum { GUARD = 16 };
    const vd_data_info *di = vd_data_get_info(ds);
    size_t c = (size_t)di->c, hw = (size_t)di->h * (size_t)di->w, n = c * hw * (size_t)batch;
    float *ref = malloc(sizeof(float) * n * (size_t)nb), *got = malloc(sizeof(float) * (n + GUARD));
    int32_t *ly = malloc(sizeof(int32_t) * (size_t)(batch * nb)), *y = malloc(sizeof(int32_t) * (size_t)batch);
    ck_assert(ref && got && ly && y);
    vd_err e;
    vd_loader_cfg cfg = { .split = VD_SPLIT_TRAIN, .batch = batch, .shuffle = true,
                          .seed = 11, .start = 3, .threads = 1 };
    vd_loader *ld;
    ck_assert_msg(vd_loader_create(&ld, ds, &cfg, &e) == 0, "%s", e.msg);
    for (int b = 0; b < nb; b++)
        ck_assert_int_eq(vd_loader_next(ld, ref + (size_t)b * n, ly + b * batch, &e), 0);
    vd_loader_destroy(&ld);
    for (size_t t = 0; t < VD_ARRAY_LEN(threads); t++) {
        cfg.threads = threads[t];
        ck_assert_msg(vd_loader_create(&ld, ds, &cfg, &e) == 0, "%s", e.msg);
        for (int b = 0; b < nb; b++) {
            const bool bf = b == 1;   /* one bf16 batch in between */
            memset(got, 0xA5, sizeof(float) * (n + GUARD));
            ck_assert_msg(vd_loader_next_as(ld, got, bf ? VD_DT_BF16 : VD_DT_F32, true, y, &e) == 0,
                          "%s", e.msg);
            if (bf) continue;
            const float *r = ref + (size_t)b * n;
            for (size_t i = 0; i < (size_t)batch; i++)
                for (size_t ch = 0; ch < c; ch++)
                    for (size_t q = 0; q < hw; q++)
                        ck_assert_msg(!memcmp(&got[(i * hw + q) * c + ch], &r[(i * c + ch) * hw + q],
                                              sizeof(float)),
                                      "threads %d batch %d: sample %zu channel %zu pixel %zu differs",
                                      threads[t], b, i, ch, q);
            for (size_t i = n; i < n + GUARD; i++)
                ck_assert_msg(((uint32_t *)got)[i] == 0xA5A5A5A5u, "threads %d: written past "
                              "the batch", threads[t]);
            ck_assert_mem_eq(y, ly + b * batch, sizeof(int32_t) * (size_t)batch);
        }
        vd_loader_destroy(&ld);
    }
    free(ref); free(got); free(ly); free(y);
}

START_TEST(loader_f32_nhwc_any_thread_count) {
    vd_net net;
    vd_err e;
    vd_dataset *ds;
    tu_tiny_net(&net, 3, 8, 8, 10, false, 10);
    ck_assert_int_eq(vd_data_open("synthetic:50", &net, 10, 5, false, &ds, &e), 0);
    f32_nhwc_batches_match(ds, 10, 6);
    vd_data_close(&ds);
    vd_net_free(&net);
    tu_tiny_net(&net, 3, 64, 64, 10, false, 120);
    ck_assert_int_eq(vd_data_open("synthetic:300", &net, 120, 5, false, &ds, &e), 0);
    f32_nhwc_batches_match(ds, 120, 3);   /* 5.9 MB: copied in parts (COPY_PART_MIN 4 MiB) */
    vd_data_close(&ds);
    vd_net_free(&net);
}
END_TEST

START_TEST(loader_bf16_any_thread_count) {
    vd_net net;
    vd_err e;
    vd_dataset *ds;
    tu_tiny_net(&net, 3, 8, 8, 10, false, 10);
    ck_assert_int_eq(vd_data_open("synthetic:50", &net, 10, 5, false, &ds, &e), 0);
    h16_batches_match(ds, VD_DT_BF16, 10, 10, 3 * 8 * 8, false, VD_DT_F32);
    h16_batches_match(ds, VD_DT_BF16, 10, 10, 3 * 8 * 8, true, VD_DT_F32);
    h16_batches_match(ds, VD_DT_F16, 10, 10, 3 * 8 * 8, false, VD_DT_F32);
    h16_batches_match(ds, VD_DT_F16, 10, 10, 3 * 8 * 8, true, VD_DT_F32);
    h16_batches_match(ds, VD_DT_F16, 10, 10, 3 * 8 * 8, true, VD_DT_BF16);
    vd_data_close(&ds);
    vd_net_free(&net);
    tu_tiny_net(&net, 3, 64, 64, 10, false, 260);
    ck_assert_int_eq(vd_data_open("synthetic:600", &net, 260, 5, false, &ds, &e), 0);
    /* the threads' split of a large batch: one 16-bit type (the
     * conversion per element is the small cases' above) */
    h16_batches_match(ds, VD_DT_BF16, 260, 6, 3 * 64 * 64, false, VD_DT_F32);
    vd_data_close(&ds);
    vd_net_free(&net);
    /* a JPEG folder, augmented (crops, flips), RGB and grey nets: the
     * samples that folder.c writes in bf16 itself */
    char *d = jpeg_folder12(3);
    char spec[700];
    snprintf(spec, sizeof spec, "folder:%s", d);
    for (int ch = 3; ch >= 1; ch -= 2) {
        tu_tiny_net(&net, ch, 16, 24, 10, false, 5);
        ck_assert_int_eq(vd_data_open(spec, &net, 5, 5, true, &ds, &e), 0);
        h16_batches_match(ds, VD_DT_BF16, 5, 10, (size_t)ch * 16 * 24, false, VD_DT_F32);
        h16_batches_match(ds, VD_DT_BF16, 5, 10, (size_t)ch * 16 * 24, true, VD_DT_F32);
        h16_batches_match(ds, VD_DT_F16, 5, 10, (size_t)ch * 16 * 24, true, VD_DT_F32);
        vd_data_close(&ds);
        vd_net_free(&net);
    }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* A synth_device loader describes the batches that a worker loader makes,
 * whatever its thread count: the same sample indices (shuffled, across
 * epochs, from a resumed position) and labels, and generated by the CPU
 * backend's fill_synthetic they are the worker loader's bytes, in floats
 * and in bf16 and fp16 (vd_loader_next_as). It refuses to make batches itself, and
 * other data sets refuse it. */
START_TEST(loader_synth_device_matches_loader) {
    enum { B = 7, NB = 10, M = 3 * 8 * 8 };     /* 70 samples of 30: epochs straddled */
    vd_net net;
    tu_tiny_net(&net, 3, 8, 8, 10, false, B);
    vd_dataset *ds;
    vd_err e;
    ck_assert_int_eq(vd_data_open("synthetic:30", &net, B, 5, false, &ds, &e), 0);
    vd_backend *be;
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
    vd_loader_cfg cfg = { .split = VD_SPLIT_TRAIN, .batch = B, .shuffle = true, .seed = 11,
                          .start = 3 };
    vd_loader *ld, *dl;
    float x[B * M], xd[B * M];
    uint16_t h[B * M], hd[B * M];
    int32_t y[B], yd[B];
    int64_t idx[B];
    static const int threads[] = { 1, 5 };
    for (size_t t = 0; t < VD_ARRAY_LEN(threads); t++) {
        cfg.threads = threads[t];
        cfg.synth_device = false;
        ck_assert_int_eq(vd_loader_create(&ld, ds, &cfg, &e), 0);
        cfg.synth_device = true;
        ck_assert_int_eq(vd_loader_create(&dl, ds, &cfg, &e), 0);
        ck_assert_int_eq(vd_loader_threads(dl), 0);
        for (int k = 0; k < NB; k++) {
            vd_dtype dt = (vd_dtype)(k % 3);   /* F32, BF16, F16 in turn */
            bool bf = dt != VD_DT_F32;
            ck_assert_int_eq(vd_loader_next_as(ld, bf ? (void *)h : (void *)x, dt, bf, y, &e), 0);
            vd_synth_batch b = { .index = idx };
            ck_assert_int_eq(vd_loader_next_synth(dl, &b, yd, &e), 0);
            ck_assert(b.seed == 5 && b.split == VD_SPLIT_TRAIN && b.classes == 10 &&
                      b.sample_numel == M && b.n == B);
            ck_assert_uint_eq(vd_loader_position(dl), 3 + (uint64_t)(k + 1) * B);
            ck_assert_mem_eq(y, yd, sizeof y);
            ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_COMPUTE, 0,
                                                bf ? (void *)hd : (void *)xd, dt, &b, &e), 0);
            if (bf) ck_assert_mem_eq(h, hd, sizeof h);
            else ck_assert_mem_eq(x, xd, sizeof x);
        }
        ck_assert_int_eq(vd_loader_next(dl, x, y, &e), VD_EINTERNAL);
        vd_synth_batch nb = { .index = idx };
        ck_assert_int_eq(vd_loader_next_synth(ld, &nb, y, &e), VD_EINTERNAL);
        vd_loader_destroy(&ld);
        vd_loader_destroy(&dl);
    }
    be->destroy(be);
    vd_data_close(&ds);
    vd_net_free(&net);
    char *d = vdt_make_mnist(20, 7);
    tu_tiny_net(&net, 1, 28, 28, 10, false, 4);
    ck_assert_int_eq(open_spec("mnist", d, &net, &ds, &e), 0);
    ck_assert_int_eq(vd_loader_create(&ld, ds, &cfg, &e), VD_EUSAGE);
    vd_data_close(&ds);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

VDT_MAIN("data", 0,
          mnist_reads_and_normalises, mnist_corrupt_files_are_edata, mnist_missing_file_is_eio,
          shape_mismatch_is_usage_error, cifar_reads_and_normalises, cifar_corrupt_is_edata,
          folder_labels_resize_and_corrupt, folder_resample_matches_reference,
          crop_boxes_center_and_random_resized, resize_any_geometry, normalize_from_the_spec,
          val_split_holds_out_a_seeded_fraction, loader_pads_the_last_batch,
          synthetic_is_deterministic_and_unit_normal,
          synthetic_matches_reference_formula, loader_synth_device_matches_loader,
          epoch_perm_is_a_permutation, loader_order_is_deterministic, jpeg_turbo_matches_stb,
          jpeg_scaled_decode_matches_full, jpeg_bad_files_are_named,
          pnm_depth_scale_and_truncation, image_kinds_and_stb_guards,
          loader_same_batches_any_thread_count, loader_bf16_any_thread_count,
          loader_f32_nhwc_any_thread_count)
