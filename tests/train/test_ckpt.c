/* test_ckpt.c — safetensors checkpoints: round trip, byte stability, strict
 * matching, corruption, atomic writes, and an independent Python reader. */
#include <dirent.h>
#include <math.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include "tutil.h"
#include "train/ckpt.h"
#include "util/json.h"

static float *rand_floats(int64_t n, uint64_t seed) {
    float *p = malloc(sizeof(float) * (size_t)n);
    vd_rng r;
    vd_rng_seed(&r, seed, 1);
    for (int64_t i = 0; i < n; i++) p[i] = vd_rng_normal(&r);
    return p;
}


static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

typedef struct fixture {
    char *dir;
    char path[600];
    vd_net net;
    float *params, *mom;
    vd_train_state st;
} fixture;

static void fx_init(fixture *f, bool bn) {
    memset(f, 0, sizeof *f);
    f->dir = vdt_tmpdir("vdnn-train-test");
    snprintf(f->path, sizeof f->path, "%s/model.safetensors", f->dir);
    tu_tiny_net(&f->net, 3, 8, 8, 10, bn, 4);
    f->params = rand_floats(f->net.param_floats, 1);
    f->mom = rand_floats(f->net.param_floats, 2);
    f->st = (vd_train_state){ .iteration = 123, .sgd_steps = 123, .samples = 492,
                              .seed = 0xFFFFFFFFFFFFFFF1ull, .batch = 4 };
}

static void fx_free(fixture *f) {
    free(f->params);
    free(f->mom);
    vd_net_free(&f->net);
    vdt_rmrf(f->dir);
    vd_free(f->dir);
}

START_TEST(round_trip_is_exact) {
    fixture f;
    fx_init(&f, true);
    vd_err e;
    ck_assert_msg(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(count_entries(f.dir), 2);        /* FILE, FILE.state, no temp files */
    float *p2 = calloc((size_t)f.net.param_floats, sizeof(float));
    float *m2 = calloc((size_t)f.net.param_floats, sizeof(float));
    vd_train_state st2;
    ck_assert_msg(vd_ckpt_load(f.path, &f.net, p2, m2, &st2, &e) == 0, "%s", e.msg);
    ck_assert_mem_eq(p2, f.params, sizeof(float) * (size_t)f.net.param_floats);
    for (int i = 0; i < f.net.n_params; i++) {
        const vd_param *p = &f.net.params[i];
        for (int64_t k = 0; k < p->numel; k++)
            ck_assert_msg(memcmp(&m2[p->offset + k],
                                 p->kind == VD_PARAM_WEIGHT ? &f.mom[p->offset + k] : &(float){ 0 },
                                 4) == 0, "momentum of %s[%lld]", p->name, (long long)k);
    }
    ck_assert_int_eq(st2.iteration, 123);
    ck_assert_int_eq(st2.sgd_steps, 123);
    ck_assert_uint_eq(st2.samples, 492);
    ck_assert_uint_eq(st2.seed, 0xFFFFFFFFFFFFFFF1ull);
    ck_assert_int_eq(st2.batch, 4);
    vd_train_state st3;
    ck_assert_int_eq(vd_ckpt_peek_state(f.path, &f.net, &st3, &e), 0);
    ck_assert_mem_eq(&st2, &st3, sizeof st2);
    int64_t it = -1;
    memset(p2, 0, sizeof(float) * (size_t)f.net.param_floats);
    ck_assert_int_eq(vd_ckpt_load_model(f.path, &f.net, p2, &it, &e), 0);
    ck_assert_int_eq(it, 123);
    ck_assert_mem_eq(p2, f.params, sizeof(float) * (size_t)f.net.param_floats);

    /* saving what was loaded reproduces the files byte for byte */
    size_t n1, n2, s1, s2;
    char *a = vdt_slurp(f.path, &n1);
    char sp[700];
    tu_state_path(f.path, sp, sizeof sp);
    char *as = vdt_slurp(sp, &s1);
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, p2, m2, &st2, &e), 0);
    char *b = vdt_slurp(f.path, &n2);
    char *bs = vdt_slurp(sp, &s2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_mem_eq(a, b, n1);
    ck_assert_uint_eq(s1, s2);
    ck_assert_mem_eq(as, bs, s1);
    vd_free(a); vd_free(b); vd_free(as); vd_free(bs);
    free(p2);
    free(m2);
    fx_free(&f);
}
END_TEST

START_TEST(layout_is_safetensors_and_torchvision) {
    fixture f;
    fx_init(&f, true);
    vd_err e;
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), 0);
    size_t n;
    unsigned char *d = (unsigned char *)vdt_slurp(f.path, &n);
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--) hl = (hl << 8) | d[k];
    ck_assert_uint_eq(hl % 8, 0);
    ck_assert(8 + hl <= n);
    char jerr[128];
    json_t *h = vd_json_parse((char *)d + 8, hl, 0, jerr, sizeof jerr);
    ck_assert_msg(h, "%s", jerr);
    const json_t *nbt = json_object_get(h, "features.1.num_batches_tracked");
    ck_assert_ptr_nonnull(nbt);
    ck_assert_str_eq(json_string_value(json_object_get(nbt, "dtype")), "I64");
    ck_assert(json_is_array(json_object_get(nbt, "shape")));
    ck_assert_uint_eq(json_array_size(json_object_get(nbt, "shape")), 0);
    uint64_t b0, b1;
    ck_assert(vd_json_u64(json_array_get(json_object_get(nbt, "data_offsets"), 0), &b0));
    ck_assert(vd_json_u64(json_array_get(json_object_get(nbt, "data_offsets"), 1), &b1));
    ck_assert_uint_eq(b1 - b0, 8);
    ck_assert_uint_eq(b0 % 8, 0);
    int64_t v;
    memcpy(&v, d + 8 + hl + b0, 8);
    ck_assert_int_eq(v, 123);
    const json_t *w = json_object_get(h, "features.0.weight");
    ck_assert_ptr_nonnull(w);
    ck_assert_str_eq(json_string_value(json_object_get(w, "dtype")), "F32");
    const json_t *shp = json_object_get(w, "shape");
    ck_assert_uint_eq(json_array_size(shp), 4);
    static const int64_t want_shape[4] = { 4, 3, 3, 3 };
    for (size_t k = 0; k < 4; k++) {
        ck_assert(json_is_integer(json_array_get(shp, k)));
        ck_assert_int_eq(json_integer_value(json_array_get(shp, k)), want_shape[k]);
    }
    ck_assert_ptr_nonnull(json_object_get(h, "features.1.running_var"));
    ck_assert_ptr_null(json_object_get(h, "features.0.bias"));   /* conv before BN has no bias */
    ck_assert_ptr_null(json_object_get(h, "momentum.features.0.weight"));
    const json_t *m = json_object_get(h, "__metadata__");
    ck_assert_str_eq(json_string_value(json_object_get(m, "format")), "pt");
    ck_assert_str_eq(json_string_value(json_object_get(m, "iteration")), "123");
    ck_assert_str_eq(json_string_value(json_object_get(m, "net")), "tiny");
    /* every tensor of the net is there plus one num_batches_tracked; nothing else */
    ck_assert_uint_eq(json_object_size(h), 1 + (size_t)f.net.n_params + 1);
    json_decref(h);
    vd_free(d);
    fx_free(&f);
}
END_TEST

START_TEST(strict_matching_reports_first_mismatch) {
    fixture f;
    fx_init(&f, true);
    vd_err e;
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, NULL, &f.st, &e), 0);
    ck_assert_int_eq(count_entries(f.dir), 1);        /* no momentum: no .state */
    vd_net other;
    tu_tiny_net(&other, 3, 8, 8, 7, true, 4);         /* classifier 7 outputs */
    float *p = calloc((size_t)other.param_floats, sizeof(float));
    ck_assert_int_eq(vd_ckpt_load_model(f.path, &other, p, NULL, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, f.path) && strstr(e.msg, "classifier.weight") &&
                  strstr(e.msg, "[10, 64]") && strstr(e.msg, "[7, 64]"), "%s", e.msg);
    free(p);
    vd_net_free(&other);
    tu_tiny_net(&other, 3, 8, 8, 10, false, 4);       /* no BN, conv with bias */
    p = calloc((size_t)other.param_floats, sizeof(float));
    ck_assert_int_eq(vd_ckpt_load_model(f.path, &other, p, NULL, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "features.0.bias") && strstr(e.msg, "missing"), "%s", e.msg);
    /* resume without the state file */
    float *m = calloc((size_t)f.net.param_floats, sizeof(float));
    vd_train_state st;
    ck_assert_int_eq(vd_ckpt_load(f.path, &f.net, f.params, m, &st, &e), VD_EIO);
    ck_assert_msg(strstr(e.msg, ".state"), "%s", e.msg);
    free(m);
    free(p);
    vd_net_free(&other);
    fx_free(&f);
}
END_TEST

START_TEST(state_must_belong_to_model) {
    fixture f;
    fx_init(&f, true);
    vd_err e;
    char other[700], sp[700], osp[700];
    snprintf(other, sizeof other, "%s/other.safetensors", f.dir);
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), 0);
    f.params[0] += 1.0f;
    ck_assert_int_eq(vd_ckpt_save(other, &f.net, f.params, f.mom, &f.st, &e), 0);
    tu_state_path(f.path, sp, sizeof sp);
    tu_state_path(other, osp, sizeof osp);
    ck_assert_int_eq(rename(osp, sp), 0);
    vd_train_state st;
    float *m = calloc((size_t)f.net.param_floats, sizeof(float));
    ck_assert_int_eq(vd_ckpt_load(f.path, &f.net, f.params, m, &st, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "does not belong"), "%s", e.msg);
    ck_assert_int_eq(vd_ckpt_peek_state(f.path, &f.net, &st, &e), VD_EDATA);
    free(m);
    fx_free(&f);
}
END_TEST

/* The state file sits next to FILE whatever the length of FILE's path (a
 * fixed 1200-byte buffer would cut "PATH.state" short and write the state
 * under a truncated name elsewhere). */
START_TEST(long_paths_keep_the_state_next_to_the_model) {
    fixture f;
    fx_init(&f, true);
    size_t cap = strlen(f.dir) + 1700;
    char *path = malloc(cap), *sp = malloc(cap + 8);
    snprintf(path, cap, "%s", f.dir);
    for (int i = 0; i < 7; i++) {        /* 7 * 201 bytes of directories */
        size_t k = strlen(path);
        path[k] = '/';
        memset(path + k + 1, 'd', 200);
        path[k + 201] = 0;
        ck_assert_int_eq(mkdir(path, 0755), 0);
    }
    strcat(path, "/model.safetensors");
    ck_assert_uint_gt(strlen(path), 1400);
    vd_err e;
    ck_assert_msg(vd_ckpt_save(path, &f.net, f.params, f.mom, &f.st, &e) == 0, "%s", e.msg);
    snprintf(sp, cap + 8, "%s.state", path);
    struct stat stt;
    ck_assert_msg(stat(sp, &stt) == 0 && S_ISREG(stt.st_mode), "no state file next to the model");
    /* exactly two entries in the last directory: the model and its state */
    *strrchr(sp, '/') = 0;
    ck_assert_int_eq(count_entries(sp), 2);
    vd_train_state st;
    float *p = calloc((size_t)f.net.param_floats, sizeof(float));
    float *m = calloc((size_t)f.net.param_floats, sizeof(float));
    ck_assert_msg(vd_ckpt_load(path, &f.net, p, m, &st, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(st.iteration, 123);
    free(p);
    free(m);
    free(path);
    free(sp);
    fx_free(&f);
}
END_TEST

/* Replace the first occurrence of `from` by `to` (same length) in file. */
static void patch_same_len(const char *path, const char *from, const char *to) {
    size_t n;
    char *b = vdt_slurp(path, &n);
    size_t fl = strlen(from);
    ck_assert_uint_eq(fl, strlen(to));
    char *hit = NULL;
    for (size_t i = 0; i + fl <= n && !hit; i++)
        if (memcmp(b + i, from, fl) == 0) hit = b + i;
    ck_assert_msg(hit != NULL, "'%s' not in %s", from, path);
    memcpy(hit, to, fl);
    tu_write(path, b, n);
    vd_free(b);
}

/* Metadata counts are plain decimals within uint64: an overflowing seed must
 * not saturate to UINT64_MAX, and " +5"-style text is not a count. */
START_TEST(metadata_counts_are_strict) {
    fixture f;
    fx_init(&f, false);
    f.st.seed = 12345678901234567890ull;
    vd_err e;
    char sp[700];
    tu_state_path(f.path, sp, sizeof sp);
    static const char *const bad[] = {
        "\"seed\":\"99999999999999999999\"",    /* > UINT64_MAX, 20 digits */
        "\"seed\":\" +234567890123456789\"",
        "\"seed\":\"1234567890123456789 \"",
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(bad); i++) {
        ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), 0);
        patch_same_len(sp, "\"seed\":\"12345678901234567890\"", bad[i]);
        vd_train_state st;
        ck_assert_int_eq(vd_ckpt_peek_state(f.path, &f.net, &st, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, "'seed'") && strstr(e.msg, ".state"), "%s", e.msg);
    }
    /* the full range itself is fine */
    f.st.seed = UINT64_MAX;
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), 0);
    vd_train_state st;
    ck_assert_msg(vd_ckpt_peek_state(f.path, &f.net, &st, &e) == 0, "%s", e.msg);
    ck_assert(st.seed == UINT64_MAX);
    fx_free(&f);
}
END_TEST

/* Every single-byte corruption of the header region and every truncation
 * must give VD_EDATA (or load fine if the change is harmless), never crash;
 * the ASan build runs this too. */
START_TEST(corruption_never_crashes) {
    fixture f;
    fx_init(&f, true);
    vd_err e;
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, NULL, &f.st, &e), 0);
    size_t n;
    char *orig = vdt_slurp(f.path, &n);
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--) hl = (hl << 8) | (unsigned char)orig[k];
    float *p = calloc((size_t)f.net.param_floats, sizeof(float));
    char *buf = malloc(n);
    int n_edata = 0;
    static const unsigned char flips[] = { 0x00, '"', '}', '9', 0xFF, ',', '\\' };
    for (size_t i = 0; i < 8 + hl; i++)
        for (size_t k = 0; k < sizeof flips; k++) {
            memcpy(buf, orig, n);
            if ((unsigned char)buf[i] == flips[k]) continue;
            buf[i] = (char)flips[k];
            tu_write(f.path, buf, n);
            int rc = vd_ckpt_load_model(f.path, &f.net, p, NULL, &e);
            ck_assert_msg(rc == 0 || rc == VD_EDATA, "byte %zu -> %d: rc %d (%s)", i, flips[k],
                          rc, e.msg);
            if (rc) {
                n_edata++;
                ck_assert_msg(strstr(e.msg, f.path), "message does not name the file: %s", e.msg);
            }
        }
    ck_assert(n_edata > 100);
    for (size_t len = 0; len < n; len += (len < 8 + hl + 16 ? 1 : 97)) {
        tu_write(f.path, orig, len);
        int rc = vd_ckpt_load_model(f.path, &f.net, p, NULL, &e);
        ck_assert_msg(rc == VD_EDATA, "truncated to %zu: rc %d", len, rc);
        ck_assert_msg(strstr(e.msg, f.path), "%s", e.msg);
    }
    free(buf);
    vd_free(orig);
    free(p);
    fx_free(&f);
}
END_TEST

/* A hand-made file whose tensors overlap / leave a hole / use F64. */
static void write_st(const char *path, const char *json, size_t data_n) {
    size_t hl = strlen(json);
    unsigned char *b = calloc(1, 8 + hl + data_n);
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)(hl >> (8 * k));
    memcpy(b + 8, json, hl);
    tu_write(path, b, 8 + hl + data_n);
    free(b);
}

START_TEST(offsets_are_validated) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    snprintf(p, sizeof p, "%s/x.safetensors", d);
    vd_net net;
    tu_tiny_net(&net, 3, 8, 8, 10, false, 4);
    float *prm = calloc((size_t)net.param_floats, sizeof(float));
    vd_err e;
    struct { const char *json; size_t n; const char *want; } cases[] = {
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlaps" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20, "hole" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16, "cover" },
        { "{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99]}}", 8, "truncated" },
        { "{\"__metadata__\":{\"x\":1}}", 0, "not a string" },
        { "[1,2]", 0, "not a JSON object" },
        { "{\"a\":1,\"a\":2}", 0, "duplicate" },
        { "{\"features.0.weight\":{\"dtype\":\"F64\",\"shape\":[4,3,3,3],"
          "\"data_offsets\":[0,864]}}", 864, "dtype F64" },
        /* the byte size is the dtype's: 2 BF16 elements are 4 bytes, not 8 */
        { "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
          "BF16 of its shape needs 4" },
        { "{\"a\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,12]}}", 12,
          "F16 of its shape needs 6" },
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++) {
        write_st(p, cases[i].json, cases[i].n);
        ck_assert_int_eq(vd_ckpt_load_model(p, &net, prm, NULL, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, cases[i].want) && strstr(e.msg, p), "case %zu: %s", i, e.msg);
    }
    free(prm);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(atomic_write_keeps_old_file) {
    fixture f;
    fx_init(&f, true);
    vd_err e;
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, NULL, &f.st, &e), 0);
    size_t n0;
    char *before = vdt_slurp(f.path, &n0);
    /* a disk that fills up halfway through the new file: a file size limit
     * makes the write fail (EFBIG) as ENOSPC would */
    f.params[0] = 42.0f;
    vdt_fsize_limit(n0 / 2);
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, NULL, &f.st, &e), VD_EIO);
    vdt_fsize_limit(RLIM_INFINITY);
    ck_assert_msg(strstr(e.msg, f.path) && strstr(e.msg, strerror(EFBIG)), "%s", e.msg);
    size_t n1;
    char *after = vdt_slurp(f.path, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert_mem_eq(before, after, n0);               /* the old checkpoint is intact */
    ck_assert_int_eq(count_entries(f.dir), 1);         /* and nothing was left behind */
    /* a directory that does not exist */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/no/such/dir/m.safetensors", f.dir);
    ck_assert_int_eq(vd_ckpt_save(bad, &f.net, f.params, NULL, &f.st, &e), VD_EIO);
    /* an unwritable directory (root ignores permissions: only checked otherwise) */
    if (geteuid() != 0) {
        char ro[700], rof[760];
        snprintf(ro, sizeof ro, "%s/ro", f.dir);
        ck_assert_int_eq(mkdir(ro, 0755), 0);
        snprintf(rof, sizeof rof, "%s/m.safetensors", ro);
        ck_assert_int_eq(vd_ckpt_save(rof, &f.net, f.params, NULL, &f.st, &e), 0);
        vd_free(after);
        after = vdt_slurp(rof, &n1);
        ck_assert_int_eq(chmod(ro, 0555), 0);
        f.params[0] = 7.0f;
        ck_assert_int_eq(vd_ckpt_save(rof, &f.net, f.params, NULL, &f.st, &e), VD_EIO);
        size_t n2;
        char *again = vdt_slurp(rof, &n2);
        ck_assert_uint_eq(n1, n2);
        ck_assert_mem_eq(after, again, n1);
        ck_assert_int_eq(count_entries(ro), 1);
        vd_free(again);
        ck_assert_int_eq(chmod(ro, 0755), 0);
    }
    vd_free(before);
    vd_free(after);
    fx_free(&f);
}
END_TEST

/* Write a checkpoint and an exact text dump of it, then let the plain-Python
 * reader (tests/train/read_safetensors.py, struct + json only) check that it
 * decodes to the same tensors; then the same with the model saved as BF16,
 * where the reader rounds the dumped fp32 weights to nearest even itself.
 * Skipped when python3 is absent. */
START_TEST(python_reader_agrees) {
    if (system("python3 -c 'import json, struct' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "python_reader_agrees: python3 not found, skipped\n");
        return;
    }
    const char *src = getenv("VD_SRCDIR");
    ck_assert_msg(src != NULL, "VD_SRCDIR not set (run through meson test)");
    fixture f;
    fx_init(&f, true);
    /* ties, a carry and FLT_MAX (to inf) among the weights for the BF16 pass */
    static const uint32_t ties[] = { 0x3F808000u, 0x3F818000u, 0xBF818000u, 0x3FFF8000u,
                                     0x7F7FFFFFu, 0x00018000u };
    for (size_t i = 0; i < VD_ARRAY_LEN(ties); i++) f.params[i] = vdt_f32_of(ties[i]);
    for (int bf = 0; bf < 2; bf++) {
        vd_err e;
        vd_ckpt_save_opts so = { .dtype = bf ? VD_CKPT_BF16 : VD_CKPT_F32 };
        ck_assert_int_eq(vd_ckpt_save_ex(f.path, &f.net, f.params, f.mom, &f.st, &so, &e), 0);
        char dump[700];
        snprintf(dump, sizeof dump, "%s/expected.txt", f.dir);
        FILE *o = fopen(dump, "w");
        ck_assert_ptr_nonnull(o);
        fprintf(o, "# which name dtype ndim dims... values...\n");
        for (int i = 0; i < f.net.n_params; i++) {
            const vd_param *p = &f.net.params[i];
            for (int pass = 0; pass < 2; pass++) {
                if (pass == 1 && p->kind != VD_PARAM_WEIGHT) continue;
                fprintf(o, "%s %s%s %s", pass ? "state" : "model", pass ? "momentum." : "", p->name,
                        bf && !pass ? "BF16" : "F32");
                fprintf(o, " %d", p->ndim);
                for (int d = 0; d < p->ndim; d++) fprintf(o, " %lld", (long long)p->shape[d]);
                const float *src_p = (pass ? f.mom : f.params) + p->offset;
                for (int64_t k = 0; k < p->numel; k++) fprintf(o, " %a", (double)src_p[k]);
                fprintf(o, "\n");
            }
        }
        fprintf(o, "model features.1.num_batches_tracked I64 0 123\n");
        fclose(o);
        char cmd[2400];
        snprintf(cmd, sizeof cmd, "python3 '%s/tests/train/read_safetensors.py' '%s' '%s'", src,
                 f.path, dump);
        int rc = system(cmd);
        ck_assert_msg(rc == 0, "%s failed (status %d)", cmd, rc);
    }
    fx_free(&f);
}
END_TEST

/* Names are written by jansson: JSON-special characters escaped and read
 * back unchanged; a tensor name that is not UTF-8 cannot be written
 * (safetensors headers are UTF-8), a data set path that is not is left out
 * of the state (as older versions did) instead of failing the save. */
START_TEST(names_are_escaped_and_utf8) {
    fixture f;
    fx_init(&f, false);
    vd_err e;
    snprintf(f.net.name, sizeof f.net.name, "t\"i\\ny\t\xc3\xa9");
    snprintf(f.st.data, sizeof f.st.data, "folder:/data/caf\xc3\xa9 \"x\"\n");
    ck_assert_msg(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e) == 0, "%s", e.msg);
    vd_train_state st;
    ck_assert_msg(vd_ckpt_peek_state(f.path, &f.net, &st, &e) == 0, "%s", e.msg);  /* net name matched */
    ck_assert_str_eq(st.data, f.st.data);
    /* the same bytes as Python's json.dumps(ensure_ascii=False) would give */
    size_t n;
    char *raw = vdt_slurp(f.path, &n);
    ck_assert_msg(strstr(raw + 8, "\"net\":\"t\\\"i\\\\ny\\t\xc3\xa9\""), "%.200s", raw + 8);
    vd_free(raw);
    snprintf(f.st.data, sizeof f.st.data, "folder:/data/caf\xe9");   /* Latin-1 */
    ck_assert_msg(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_ckpt_peek_state(f.path, &f.net, &st, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(st.data, "");
    size_t n0;
    char *before = vdt_slurp(f.path, &n0);
    snprintf(f.net.params[0].name, sizeof f.net.params[0].name, "conv\xe9.weight");
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "UTF-8"), "%s", e.msg);
    char *after = vdt_slurp(f.path, &n);
    ck_assert_uint_eq(n, n0);
    ck_assert_mem_eq(before, after, n);           /* the old checkpoint is untouched */
    vd_free(before);
    vd_free(after);
    fx_free(&f);
}
END_TEST

/* A header of 50,000 tensor entries (3.4 MB of JSON): loaded as a
 * checkpoint of a small net it is refused at once, before it is parsed (a
 * checkpoint of that net needs a header of at most 64 KiB + 1 KiB per
 * tensor); parsed on its own, it is answered in linear time: once with a
 * duplicate key at the very end (rejected: duplicates are found through
 * jansson's hash table, not by comparing each key with every earlier one,
 * which took 213 s here for 200,000 entries: about 13 s for these), once
 * with distinct keys (accepted). */
START_TEST(huge_header_is_linear) {
    enum { N = 50000 };
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    snprintf(p, sizeof p, "%s/huge.safetensors", d);
    vd_net net;
    tu_tiny_net(&net, 3, 8, 8, 10, false, 4);
    float *prm = calloc((size_t)net.param_floats, sizeof(float));
    size_t cap = (size_t)N * 80 + 64;
    char *json = malloc(cap);
    ck_assert_ptr_nonnull(json);
    for (int dup = 1; dup >= 0; dup--) {
        size_t n = (size_t)snprintf(json, cap, "{");
        for (int i = 0; i < N; i++)
            n += (size_t)snprintf(json + n, cap - n,
                                  "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                                  i ? "," : "", i, 4 * i, 4 * i + 4);
        if (dup)   /* the first key again, after all the others */
            n += (size_t)snprintf(json + n, cap - n, ",\"t0\":{\"dtype\":\"F32\",\"shape\":[0],"
                                  "\"data_offsets\":[0,0]}");
        n += (size_t)snprintf(json + n, cap - n, "}");
        ck_assert_uint_lt(n, cap);
        write_st(p, json, (size_t)N * 4);
        vd_err e;
        double c0 = (double)clock() / CLOCKS_PER_SEC;
        ck_assert_int_eq(vd_ckpt_load_model(p, &net, prm, NULL, &e), VD_EDATA);
        double dc = (double)clock() / CLOCKS_PER_SEC - c0;
        ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "not a checkpoint of") &&
                      strstr(e.msg, "tensors needs at most"), "%s", e.msg);
        /* CPU time, so that other processes cannot fail it: reading the
         * 3.4 MB file is all that happens (a few ms here; the sanitizer build
         * too stays far below a second) */
        ck_assert_msg(dc < 1.0, "refusing the header took %.3f s of CPU", dc);
        char jerr[160];
        c0 = (double)clock() / CLOCKS_PER_SEC;
        json_t *h = vd_json_parse(json, n, 0, jerr, sizeof jerr);
        dc = (double)clock() / CLOCKS_PER_SEC - c0;
        if (dup) ck_assert_msg(!h && strstr(jerr, "duplicate object key") && strstr(jerr, "\"t0\""),
                               "%s", jerr);
        else ck_assert_msg(h && json_object_size(h) == N, "%s", jerr);
        json_decref(h);
        /* about 0.3-0.45 s of CPU here (2 shared cores; jansson parses ~12
         * MB/s on them), where a quadratic reader takes about 13 s (213 s
         * at four times the entries). 5 s leaves room for the sanitizer
         * build (3-4x slower) and still fails a quadratic reader. */
        ck_assert_msg(dc < 5.0, "%s header: %.1f s of CPU", dup ? "duplicate" : "distinct", dc);
        fprintf(stderr, "huge_header_is_linear: %d keys%s: parse %.3f s of CPU\n", N + dup,
                dup ? " (last one a duplicate)" : "", dc);
    }
    free(json);
    free(prm);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- 16-bit floats: loading BF16 / F16, saving BF16 ------------------------ */

/* Bit patterns with their values in closed form. */
typedef struct pat { uint16_t h; float v; } pat;
static pat g_bf16[8], g_f16[10];
static void init_pats(void) {
    const pat bf[8] = {
        { 0x3F80, 1.0f }, { 0xC020, -2.5f }, { 0x0001, 0 /* 2^-133, below */ },
        { 0x3E00, 0.125f }, { 0x8000, -0.0f }, { 0x7F7F, 0 /* 255 * 2^120 */ },
        { 0x4049, 3.140625f }, { 0xBB80, -0.00390625f } };
    const pat f16[10] = {
        { 0x3C00, 1.0f }, { 0xC100, -2.5f }, { 0x0001, 0 /* 2^-24 */ },
        { 0x03FF, 0 /* 1023 * 2^-24 */ }, { 0x7BFF, 65504.0f }, { 0x8001, 0 /* -2^-24 */ },
        { 0x3555, 0.333251953125f /* 1365 * 2^-12 */ }, { 0x0400, 0 /* 2^-14 */ },
        { 0xFBFF, -65504.0f }, { 0x5640, 100.0f } };
    memcpy(g_bf16, bf, sizeof bf);
    memcpy(g_f16, f16, sizeof f16);
    g_bf16[2].v = ldexpf(1.0f, -133);      /* the smallest bf16 subnormal */
    g_bf16[5].v = ldexpf(255.0f, 120);     /* the largest finite bf16 */
    g_f16[2].v = ldexpf(1.0f, -24);        /* the smallest f16 subnormal */
    g_f16[3].v = ldexpf(1023.0f, -24);     /* the largest f16 subnormal */
    g_f16[5].v = -ldexpf(1.0f, -24);
    g_f16[7].v = ldexpf(1.0f, -14);        /* the smallest normal f16 */
}

/* A hand-written safetensors file: tensors in the order given, the data of
 * each as given (little-endian bytes). */
typedef struct hand_t {
    char name[96];
    const char *dtype;
    int ndim;
    int64_t shape[4];
    unsigned char *data;
    size_t bytes;
} hand_t;

static void write_hand(const char *path, const hand_t *t, int n) {
    size_t cap = 8192, k = 0, data_n = 0;
    char *json = malloc(cap);
    k += (size_t)snprintf(json + k, cap - k, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        k += (size_t)snprintf(json + k, cap - k, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name,
                              t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            k += (size_t)snprintf(json + k, cap - k, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        k += (size_t)snprintf(json + k, cap - k, "],\"data_offsets\":[%zu,%zu]}", data_n,
                              data_n + t[i].bytes);
        data_n += t[i].bytes;
    }
    k += (size_t)snprintf(json + k, cap - k, "}");
    ck_assert_uint_lt(k, cap);
    unsigned char *b = malloc(8 + k + data_n);
    for (int j = 0; j < 8; j++) b[j] = (unsigned char)((uint64_t)k >> (8 * j));
    memcpy(b + 8, json, k);
    size_t off = 8 + k;
    for (int i = 0; i < n; i++) {
        if (t[i].bytes) memcpy(b + off, t[i].data, t[i].bytes);
        off += t[i].bytes;
    }
    tu_write(path, b, off);
    free(b);
    free(json);
}

/* The tensors of net's parameters as PyTorch would save them: parameter i in
 * dtypes[i % nd], element k the pattern k of that dtype's table (F32:
 * 0.25 k - 3), plus "<bn>.num_batches_tracked" (I64 5) for each BN layer.
 * want (param_floats) gets the values in closed form. Returns the count;
 * free the data with free_hand. */
static int hand_model(const vd_net *net, const char *const *dtypes, int nd, hand_t *t,
                      float *want) {
    int n = 0;
    for (int i = 0; i < net->n_params; i++) {
        const vd_param *p = &net->params[i];
        hand_t *h = &t[n++];
        snprintf(h->name, sizeof h->name, "%s", p->name);
        h->dtype = dtypes[i % nd];
        h->ndim = p->ndim;
        for (int d = 0; d < p->ndim; d++) h->shape[d] = p->shape[d];
        bool f32 = !strcmp(h->dtype, "F32"), bf = !strcmp(h->dtype, "BF16");
        h->bytes = (size_t)p->numel * (f32 ? 4 : 2);
        h->data = malloc(h->bytes);
        for (int64_t k = 0; k < p->numel; k++) {
            if (f32) {
                float v = 0.25f * (float)k - 3.0f;
                memcpy(h->data + 4 * k, &v, 4);
                want[p->offset + k] = v;
                continue;
            }
            const pat *pt = bf ? &g_bf16[k % 8] : &g_f16[k % 10];
            h->data[2 * k] = (unsigned char)(pt->h & 0xFF);
            h->data[2 * k + 1] = (unsigned char)(pt->h >> 8);
            want[p->offset + k] = pt->v;
        }
    }
    for (int i = 0; i < net->n_layers; i++) {
        if (net->layers[i].op != VD_OP_BATCHNORM) continue;
        hand_t *h = &t[n++];
        snprintf(h->name, sizeof h->name, "%s.num_batches_tracked", net->layers[i].name);
        h->dtype = "I64";
        h->ndim = 0;
        h->bytes = 8;
        h->data = calloc(1, 8);
        h->data[0] = 5;
    }
    return n;
}

static void free_hand(hand_t *t, int n) {
    for (int i = 0; i < n; i++) free(t[i].data);
}

/* A state_dict PyTorch saved in bf16 (every float tensor BF16, the BN
 * counter I64), one in fp16, and one mixing F32, BF16 and F16: each loads
 * into the fp32 parameters with the exact values of the bit patterns
 * (subnormals of both formats included), compared bit for bit. */
START_TEST(loads_bf16_and_f16_tensors) {
    init_pats();
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    snprintf(p, sizeof p, "%s/half.safetensors", d);
    vd_net net;
    tu_tiny_net(&net, 3, 8, 8, 10, true, 4);
    hand_t t[16];
    ck_assert_int_le(net.n_params + 1, 16);
    float *want = calloc((size_t)net.param_floats, sizeof(float));
    float *got = calloc((size_t)net.param_floats, sizeof(float));
    static const char *const all_bf[] = { "BF16" }, *const all_f16[] = { "F16" },
                             *const mixed[] = { "BF16", "F16", "F32" };
    const struct { const char *const *dt; int n; } sets[] = { { all_bf, 1 }, { all_f16, 1 },
                                                              { mixed, 3 } };
    vd_err e;
    for (size_t s = 0; s < VD_ARRAY_LEN(sets); s++) {
        int n = hand_model(&net, sets[s].dt, sets[s].n, t, want);
        write_hand(p, t, n);
        free_hand(t, n);
        memset(got, 0xA5, sizeof(float) * (size_t)net.param_floats);
        int64_t it = -1;
        ck_assert_msg(vd_ckpt_load_model(p, &net, got, &it, &e) == 0, "set %zu: %s", s, e.msg);
        ck_assert_int_eq(it, 0);                  /* no "iteration" metadata: 0 */
        for (int64_t k = 0; k < net.param_floats; k++)
            ck_assert_msg(vdt_bits_of(got[k]) == vdt_bits_of(want[k]), "set %zu, float %lld: %a, expected %a",
                          s, (long long)k, (double)got[k], (double)want[k]);
    }
    /* the patterns really were all used (a table entry of 0 would hide one) */
    for (int i = 0; i < 8; i++) ck_assert(g_bf16[i].v != 0 || g_bf16[i].h == 0x8000);
    for (int i = 0; i < 10; i++) ck_assert(g_f16[i].v != 0);
    /* an F16 infinity or a BF16 NaN loads, converted, and is then refused as
     * any non-finite weight is: 5, naming the tensor and the element */
    const struct { const char *dtype; uint16_t h; const char *what; } bad[] = {
        { "F16", 0x7C00, "infinite" }, { "F16", 0xFC00, "infinite" },
        { "BF16", 0x7FC0, "NaN" }, { "BF16", 0xFF80, "infinite" }, { "F16", 0x7E00, "NaN" } };
    for (size_t b = 0; b < VD_ARRAY_LEN(bad); b++) {
        const char *dt[] = { bad[b].dtype };
        int n = hand_model(&net, dt, 1, t, want);
        int last = net.n_params - 1;              /* classifier.bias, element 3 */
        ck_assert_str_eq(t[last].name, "classifier.bias");
        t[last].data[6] = (unsigned char)(bad[b].h & 0xFF);
        t[last].data[7] = (unsigned char)(bad[b].h >> 8);
        write_hand(p, t, n);
        free_hand(t, n);
        ck_assert_int_eq(vd_ckpt_load_model(p, &net, got, NULL, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, "'classifier.bias'") && strstr(e.msg, bad[b].what) &&
                      strstr(e.msg, "element 3"), "%s", e.msg);
    }
    free(want);
    free(got);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* Dtypes that are not F32, BF16 or F16 (each with the right byte size, so
 * only the dtype is wrong): 5, naming the tensor and the dtype. */
START_TEST(unsupported_dtype_names_the_tensor) {
    init_pats();
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[600];
    snprintf(p, sizeof p, "%s/odd.safetensors", d);
    vd_net net;
    tu_tiny_net(&net, 3, 8, 8, 10, false, 4);
    float *want = calloc((size_t)net.param_floats, sizeof(float));
    float *got = calloc((size_t)net.param_floats, sizeof(float));
    static const struct { const char *dtype; size_t size; } dts[] = {
        { "F64", 8 }, { "I64", 8 }, { "I32", 4 }, { "I16", 2 }, { "U8", 1 }, { "I8", 1 },
        { "U16", 2 }, { "BOOL", 1 }, { "F8_E4M3", 1 }, { "F8_E5M2", 1 } };
    const char *f32[] = { "F32" };
    hand_t t[8];
    vd_err e;
    for (size_t i = 0; i < VD_ARRAY_LEN(dts); i++) {
        int n = hand_model(&net, f32, 1, t, want);
        hand_t *h = &t[n - 1];
        ck_assert_str_eq(h->name, "classifier.bias");
        h->dtype = dts[i].dtype;
        h->bytes = 10 * dts[i].size;
        free(h->data);
        h->data = calloc(1, h->bytes);
        write_hand(p, t, n);
        free_hand(t, n);
        ck_assert_int_eq(vd_ckpt_load_model(p, &net, got, NULL, &e), VD_EDATA);
        char dtype_is[40];
        snprintf(dtype_is, sizeof dtype_is, "dtype %s,", dts[i].dtype);
        ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "'classifier.bias'") &&
                      strstr(e.msg, dtype_is), "%s: %s", dts[i].dtype, e.msg);
    }
    /* the same for the momentum of a state file: FILE.state can hold no F64 */
    fixture f;
    fx_init(&f, false);
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), 0);
    char sp[700];
    tu_state_path(f.path, sp, sizeof sp);
    /* same length: "F32" of the first momentum tensor becomes "I32" */
    patch_same_len(sp, "\"momentum.features.0.weight\":{\"dtype\":\"F32\"",
                   "\"momentum.features.0.weight\":{\"dtype\":\"I32\"");
    vd_train_state st;
    ck_assert_int_eq(vd_ckpt_load(f.path, &f.net, got, want, &st, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "'momentum.features.0.weight'") && strstr(e.msg, "dtype I32,"),
                  "%s", e.msg);
    fx_free(&f);
    free(want);
    free(got);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* The data bytes of tensor name in the safetensors buffer d (header h, hl):
 * dtype, numel and bytes checked. */
static const unsigned char *tensor_bytes(const unsigned char *d, uint64_t hl, const json_t *h,
                                         const char *name, const char *dtype, int64_t numel,
                                         int esize) {
    const json_t *t = json_object_get(h, name);
    ck_assert_msg(t != NULL, "no tensor '%s'", name);
    ck_assert_str_eq(json_string_value(json_object_get(t, "dtype")), dtype);
    uint64_t b0, b1;
    ck_assert(vd_json_u64(json_array_get(json_object_get(t, "data_offsets"), 0), &b0));
    ck_assert(vd_json_u64(json_array_get(json_object_get(t, "data_offsets"), 1), &b1));
    ck_assert_uint_eq(b1 - b0, (uint64_t)numel * (uint64_t)esize);
    return d + 8 + hl + b0;
}

static json_t *header_of(const unsigned char *d, uint64_t *hl) {
    *hl = 0;
    for (int k = 7; k >= 0; k--) *hl = (*hl << 8) | d[k];
    char jerr[128];
    json_t *h = vd_json_parse((const char *)d + 8, *hl, 0, jerr, sizeof jerr);
    ck_assert_msg(h != NULL, "%s", jerr);
    return h;
}

/* --save-dtype bf16: FILE holds every parameter and buffer as BF16, under
 * the same names and shapes, each the fp32 master weight rounded to nearest
 * even (hand-picked ties and carries checked against their known results);
 * the BN counter stays I64 and FILE.state's momentum F32, bit for bit, with
 * "model_dtype": "BF16". Loading it back gives the rounded weights exactly
 * and the exact momentum; saving those again as BF16 gives the same bytes. */
START_TEST(save_bf16_round_trips) {
    fixture f;
    fx_init(&f, true);
    const vd_param *w0 = &f.net.params[0];
    ck_assert_str_eq(w0->name, "features.0.weight");
    static const struct { uint32_t f; uint16_t bf; } picks[] = {
        { 0x3F808000u, 0x3F80 },   /* tie, even: down */
        { 0x3F818000u, 0x3F82 },   /* tie, odd: up */
        { 0xBF818000u, 0xBF82 },   /* the same, negative */
        { 0x3F80FFFFu, 0x3F81 },   /* above the tie: up (not truncated) */
        { 0x3FFF8000u, 0x4000 },   /* carries into the exponent */
        { 0xC0200000u, 0xC020 },   /* -2.5: exact */
        { 0x007FFFFFu, 0x0080 },   /* the largest f32 subnormal: up to a normal */
        { 0x3F817FFFu, 0x3F81 },   /* below the tie: down */
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(picks); i++) f.params[w0->offset + (int64_t)i] = vdt_f32_of(picks[i].f);
    vd_err e;
    vd_ckpt_save_opts so = { .dtype = VD_CKPT_BF16 };
    ck_assert_msg(vd_ckpt_save_ex(f.path, &f.net, f.params, f.mom, &f.st, &so, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(count_entries(f.dir), 2);
    size_t n;
    unsigned char *d = (unsigned char *)vdt_slurp(f.path, &n);
    uint64_t hl;
    json_t *h = header_of(d, &hl);
    ck_assert_uint_eq(hl % 8, 0);
    /* the size: header, one I64 counter, 2 bytes per parameter float */
    ck_assert_uint_eq(n, 8 + hl + 8 + 2 * (uint64_t)f.net.param_floats);
    ck_assert_uint_eq(json_object_size(h), 1 + (size_t)f.net.n_params + 1);
    for (int i = 0; i < f.net.n_params; i++) {
        const vd_param *p = &f.net.params[i];
        const json_t *shp = json_object_get(json_object_get(h, p->name), "shape");
        ck_assert_uint_eq(json_array_size(shp), (size_t)p->ndim);
        for (int k = 0; k < p->ndim; k++)
            ck_assert_int_eq(json_integer_value(json_array_get(shp, (size_t)k)), p->shape[k]);
        const unsigned char *b = tensor_bytes(d, hl, h, p->name, "BF16", p->numel, 2);
        for (int64_t k = 0; k < p->numel; k++) {
            uint16_t got = (uint16_t)(b[2 * k] | b[2 * k + 1] << 8);
            ck_assert_msg(got == vd_f32_to_bf16(f.params[p->offset + k]), "%s[%lld]: 0x%04x",
                          p->name, (long long)k, got);
            if (i == 0 && k < (int64_t)VD_ARRAY_LEN(picks))
                ck_assert_msg(got == picks[k].bf, "0x%08x saved as 0x%04x, expected 0x%04x",
                              picks[k].f, got, picks[k].bf);
        }
    }
    int64_t nbt;
    memcpy(&nbt, tensor_bytes(d, hl, h, "features.1.num_batches_tracked", "I64", 1, 8), 8);
    ck_assert_int_eq(nbt, 123);
    json_decref(h);
    vd_free(d);
    /* the state: F32 momentum, bit for bit, and the model's dtype */
    char sp[700];
    tu_state_path(f.path, sp, sizeof sp);
    d = (unsigned char *)vdt_slurp(sp, &n);
    h = header_of(d, &hl);
    for (int i = 0; i < f.net.n_params; i++) {
        const vd_param *p = &f.net.params[i];
        if (p->kind != VD_PARAM_WEIGHT) continue;
        char name[160];
        snprintf(name, sizeof name, "momentum.%s", p->name);
        const unsigned char *b = tensor_bytes(d, hl, h, name, "F32", p->numel, 4);
        ck_assert_mem_eq(b, f.mom + p->offset, 4 * (size_t)p->numel);
    }
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(h, "__metadata__"),
                                                       "model_dtype")), "BF16");
    json_decref(h);
    vd_free(d);

    /* load: the rounded weights, the exact momentum */
    float *p2 = calloc((size_t)f.net.param_floats, sizeof(float));
    float *m2 = calloc((size_t)f.net.param_floats, sizeof(float));
    vd_train_state st2, st3;
    ck_assert_msg(vd_ckpt_load(f.path, &f.net, p2, m2, &st2, &e) == 0, "%s", e.msg);
    for (int64_t k = 0; k < f.net.param_floats; k++)
        ck_assert_uint_eq(vdt_bits_of(p2[k]), (uint32_t)vd_f32_to_bf16(f.params[k]) << 16);
    for (size_t i = 0; i < VD_ARRAY_LEN(picks); i++)
        ck_assert_uint_eq(vdt_bits_of(p2[w0->offset + (int64_t)i]), (uint32_t)picks[i].bf << 16);
    for (int i = 0; i < f.net.n_params; i++) {
        const vd_param *p = &f.net.params[i];
        if (p->kind == VD_PARAM_WEIGHT)
            ck_assert_mem_eq(m2 + p->offset, f.mom + p->offset, 4 * (size_t)p->numel);
    }
    ck_assert_str_eq(st2.model_dtype, "BF16");
    ck_assert_int_eq(st2.iteration, 123);
    ck_assert_int_eq(vd_ckpt_peek_state(f.path, &f.net, &st3, &e), 0);
    ck_assert_mem_eq(&st2, &st3, sizeof st2);
    /* the rounded weights saved as BF16 again: the same bytes */
    size_t n1, n2;
    char *a = vdt_slurp(f.path, &n1);
    ck_assert_int_eq(vd_ckpt_save_ex(f.path, &f.net, p2, m2, &st2, &so, &e), 0);
    char *b = vdt_slurp(f.path, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_mem_eq(a, b, n1);
    vd_free(a);
    vd_free(b);
    /* and as F32 (the default): no model_dtype in the state, F32 on load */
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, p2, m2, &st2, &e), 0);
    a = vdt_slurp(sp, &n1);
    ck_assert_ptr_null(strstr(a + 8, "model_dtype"));
    vd_free(a);
    ck_assert_int_eq(vd_ckpt_peek_state(f.path, &f.net, &st3, &e), 0);
    ck_assert_str_eq(st3.model_dtype, "F32");
    /* a model_dtype that is neither is a damaged state */
    ck_assert_int_eq(vd_ckpt_save_ex(f.path, &f.net, p2, m2, &st2, &so, &e), 0);
    patch_same_len(sp, "\"model_dtype\":\"BF16\"", "\"model_dtype\":\"F8E5\"");
    ck_assert_int_eq(vd_ckpt_peek_state(f.path, &f.net, &st3, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "model_dtype") && strstr(e.msg, ".state"), "%s", e.msg);
    free(p2);
    free(m2);
    fx_free(&f);
}
END_TEST

/* The best evaluation (--save-best, --early-stop) round-trips exactly,
 * is absent when not tracked, and a damaged record is refused. */
START_TEST(best_round_trips_and_is_checked) {
    fixture f;
    fx_init(&f, false);
    vd_err e;
    char sp[700];
    tu_state_path(f.path, sp, sizeof sp);
    size_t n;
    vd_train_state st;
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), 0);
    char *raw = vdt_slurp(sp, &n);
    ck_assert_msg(!strstr(raw + 8, "best"), "%.400s", raw + 8);   /* not tracked: absent */
    vd_free(raw);
    ck_assert_int_eq(vd_ckpt_peek_state(f.path, &f.net, &st, &e), 0);
    ck_assert(!st.best.known);
    /* an accuracy that needs all 17 digits (not a multiple of a power of 2) */
    f.st.best = (vd_train_best){ .known = true, .acc = 29.0 / 31.0, .iter = 100, .since = 2 };
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), 0);
    ck_assert_msg(vd_ckpt_peek_state(f.path, &f.net, &st, &e) == 0, "%s", e.msg);
    ck_assert(st.best.known && st.best.acc == 29.0 / 31.0 && st.best.iter == 100 &&
              st.best.since == 2);
    static const struct { const char *good, *bad, *what; } cases[] = {
        { "\"best_accuracy\":\"0.93548387096774188\"", "\"best_accuracy\":\"1.93548387096774188\"",
          "best_accuracy" },
        { "\"best_accuracy\":\"0.93548387096774188\"", "\"best_accuracy\":\"nan                \"",
          "best_accuracy" },
        { "\"best_iteration\":\"100\"", "\"best_iteration\":\"124\"", "beyond the iteration" },
        { "\"evals_since_best\":\"2\"", "\"evals_since_best\":\"x\"", "evals_since_best" },
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++) {
        ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), 0);
        patch_same_len(sp, cases[i].good, cases[i].bad);
        char prev[720];
        snprintf(prev, sizeof prev, "%s.prev", sp);
        unlink(prev);   /* the good state before: the reader would fall back to it */
        ck_assert_int_eq(vd_ckpt_peek_state(f.path, &f.net, &st, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, cases[i].what) && strstr(e.msg, ".state"), "%s", e.msg);
    }
    fx_free(&f);
}
END_TEST

/* AdamW's state: "exp_avg.<name>" and "exp_avg_sq.<name>" for every
 * trainable parameter (torch's state names), "optimizer": "adamw" in the
 * metadata; the round trip is exact (buffers' state zero); a run of the
 * other optimizer refuses it (VD_EUSAGE, naming both); a state whose
 * optimizer is unknown, or that lacks a tensor, is damaged (VD_EDATA); a
 * state without "optimizer" (older versions) is SGD's. */
START_TEST(adamw_state_round_trips) {
    fixture f;
    fx_init(&f, true);
    f.net.train.optimizer = VD_OPT_ADAMW;
    int64_t pf = f.net.param_floats, sf = vd_net_state_floats(&f.net);
    ck_assert_int_eq(sf, 2 * pf);
    float *state = rand_floats(sf, 3), *p2 = calloc((size_t)pf, 4), *s2 = calloc((size_t)sf, 4);
    ck_assert(p2 && s2);
    vd_err e;
    ck_assert_msg(vd_ckpt_save(f.path, &f.net, f.params, state, &f.st, &e) == 0, "%s", e.msg);
    char sp[700], name[200];
    tu_state_path(f.path, sp, sizeof sp);
    size_t n;
    char *raw = vdt_slurp(sp, &n);
    const vd_param *w = &f.net.params[0];
    ck_assert(w->kind == VD_PARAM_WEIGHT);
    snprintf(name, sizeof name, "\"exp_avg.%s\"", w->name);
    ck_assert_msg(strstr(raw + 8, name), "%.400s", raw + 8);
    snprintf(name, sizeof name, "\"exp_avg_sq.%s\"", w->name);
    ck_assert_msg(strstr(raw + 8, name), "%.400s", raw + 8);
    ck_assert_msg(strstr(raw + 8, "\"optimizer\":\"adamw\"") && !strstr(raw + 8, "momentum."),
                  "%.400s", raw + 8);
    vd_free(raw);
    vd_train_state st;
    ck_assert_msg(vd_ckpt_load(f.path, &f.net, p2, s2, &st, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(st.optimizer, VD_OPT_ADAMW);
    for (int i = 0; i < f.net.n_params; i++) {
        const vd_param *p = &f.net.params[i];
        for (int a = 0; a < 2; a++)
            for (int64_t k = 0; k < p->numel; k++) {
                int64_t at = a * pf + p->offset + k;
                ck_assert_msg(p->kind == VD_PARAM_WEIGHT ? s2[at] == state[at] : s2[at] == 0,
                              "state %d of %s[%lld]", a, p->name, (long long)k);
            }
    }
    /* the other optimizer's run */
    f.net.train.optimizer = VD_OPT_SGD;
    ck_assert_int_eq(vd_ckpt_load(f.path, &f.net, p2, s2, &st, &e), VD_EUSAGE);
    ck_assert_msg(strstr(e.msg, "trained with optimizer adamw, and this run's is sgd"), "%s", e.msg);
    f.net.train.optimizer = VD_OPT_ADAMW;
    /* damaged: an unknown optimizer; a missing exp_avg_sq tensor */
    patch_same_len(sp, "\"optimizer\":\"adamw\"", "\"optimizer\":\"adamx\"");
    ck_assert_int_eq(vd_ckpt_peek_state(f.path, &f.net, &st, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "'optimizer'") && strstr(e.msg, ".state"), "%s", e.msg);
    ck_assert_msg(vd_ckpt_save(f.path, &f.net, f.params, state, &f.st, &e) == 0, "%s", e.msg);
    char from[200], to[200];
    snprintf(from, sizeof from, "\"exp_avg_sq.%s\"", w->name);
    snprintf(to, sizeof to, "\"exp_avg_sX.%s\"", w->name);
    patch_same_len(sp, from, to);
    ck_assert_int_eq(vd_ckpt_load(f.path, &f.net, p2, s2, &st, &e), VD_EDATA);
    snprintf(name, sizeof name, "'exp_avg_sq.%s' is missing", w->name);
    ck_assert_msg(strstr(e.msg, name), "%s", e.msg);
    /* an SGD state without the key (as older versions wrote it) is SGD's */
    f.net.train.optimizer = VD_OPT_SGD;
    ck_assert_msg(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e) == 0, "%s", e.msg);
    patch_same_len(sp, "\"optimizer\":\"sgd\"", "\"optimizes\":\"sgd\"");
    ck_assert_msg(vd_ckpt_load(f.path, &f.net, p2, s2, &st, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(st.optimizer, VD_OPT_SGD);
    free(state);
    free(p2);
    free(s2);
    fx_free(&f);
}
END_TEST

/* The derived names of --keep and --save-best, and which names are numbered. */
START_TEST(tagged_names) {
    static const struct { const char *path, *tag, *want; } t[] = {
        { "lenet.safetensors", "500", "lenet-500.safetensors" },
        { "out/v1.2/ck.st", "best", "out/v1.2/ck-best.st" },
        { "out.d/ck", "7", "out.d/ck-7" },
        { "dir/.hidden", "best", "dir/.hidden-best" },
        { "a.b.c", "1", "a.b-1.c" },
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(t); i++) {
        char *g = vd_ckpt_tagged(t[i].path, t[i].tag, NULL);
        ck_assert_str_eq(g, t[i].want);
        vd_free(g);
    }
    static const struct { const char *path, *name; int64_t iter; } m[] = {
        { "d/lenet.safetensors", "lenet-500.safetensors", 500 },
        { "ck", "ck-9007199254740992", 9007199254740992 },
        { "a.b.c", "a.b-12.c", 12 },
        { "d/lenet.safetensors", "lenet-best.safetensors", -1 },
        { "d/lenet.safetensors", "lenet-0500.safetensors", -1 },
        { "d/lenet.safetensors", "lenet-0.safetensors", -1 },
        { "d/lenet.safetensors", "lenet-.safetensors", -1 },
        { "d/lenet.safetensors", "lenet-5.safetensors.state", -1 },
        { "d/lenet.safetensors", "lenet-5a.safetensors", -1 },
        { "d/lenet.safetensors", "lenet5.safetensors", -1 },
        { "ck", "ck-10000000000000000", -1 },      /* 17 digits: beyond any run */
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(m); i++) {
        int64_t it = -1;
        bool yes = vd_ckpt_tagged_iter(m[i].path, m[i].name, &it);
        ck_assert_msg(yes == (m[i].iter >= 0) && (!yes || it == m[i].iter), "%s %s: %d %lld",
                      m[i].path, m[i].name, yes, (long long)it);
    }
}
END_TEST

VDT_MAIN("ckpt", 120,
          round_trip_is_exact, layout_is_safetensors_and_torchvision,
          strict_matching_reports_first_mismatch, state_must_belong_to_model,
          corruption_never_crashes, offsets_are_validated, atomic_write_keeps_old_file,
          python_reader_agrees, names_are_escaped_and_utf8, huge_header_is_linear,
          long_paths_keep_the_state_next_to_the_model, metadata_counts_are_strict,
          loads_bf16_and_f16_tensors, unsupported_dtype_names_the_tensor, save_bf16_round_trips,
          best_round_trips_and_is_checked, tagged_names, adamw_state_round_trips)
