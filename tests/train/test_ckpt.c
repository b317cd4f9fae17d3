/* test_ckpt.c — safetensors checkpoints: round trip, byte stability, strict
 * matching, corruption, atomic writes, and an independent Python reader. */
#include <dirent.h>
#include <math.h>
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
    vd_ckpt_state_path(f.path, sp, sizeof sp);
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
    vd_ckpt_state_path(f.path, sp, sizeof sp);
    vd_ckpt_state_path(other, osp, sizeof osp);
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
 * fixed 1200-byte buffer used to cut "PATH.state" short and write the state
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
    vd_ckpt_state_path(f.path, sp, sizeof sp);
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

/* A hand-made file whose tensors overlap / leave a hole / use F16. */
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
        { "{\"features.0.weight\":{\"dtype\":\"F16\",\"shape\":[4,3,3,3],"
          "\"data_offsets\":[0,216]}}", 216, "F16" },
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
    /* make the temp file impossible to create: a directory squats its name */
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", f.path, (long)getpid());
    ck_assert_int_eq(mkdir(tmp, 0755), 0);
    f.params[0] = 42.0f;
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, NULL, &f.st, &e), VD_EIO);
    ck_assert_msg(strstr(e.msg, f.path), "%s", e.msg);
    size_t n1;
    char *after = vdt_slurp(f.path, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert_mem_eq(before, after, n0);               /* the old checkpoint is intact */
    ck_assert_int_eq(rmdir(tmp), 0);
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
 * decodes to the same tensors. Skipped when python3 is absent. */
START_TEST(python_reader_agrees) {
    if (system("python3 -c 'import json, struct' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "python_reader_agrees: python3 not found, skipped\n");
        return;
    }
    const char *src = getenv("VD_SRCDIR");
    ck_assert_msg(src != NULL, "VD_SRCDIR not set (run through meson test)");
    fixture f;
    fx_init(&f, true);
    vd_err e;
    ck_assert_int_eq(vd_ckpt_save(f.path, &f.net, f.params, f.mom, &f.st, &e), 0);
    char dump[700];
    snprintf(dump, sizeof dump, "%s/expected.txt", f.dir);
    FILE *o = fopen(dump, "w");
    ck_assert_ptr_nonnull(o);
    fprintf(o, "# which name dtype ndim dims... values...\n");
    for (int i = 0; i < f.net.n_params; i++) {
        const vd_param *p = &f.net.params[i];
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1 && p->kind != VD_PARAM_WEIGHT) continue;
            fprintf(o, "%s %s%s F32", pass ? "state" : "model", pass ? "momentum." : "", p->name);
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

/* A header of 200,000 tensor entries (13.6 MB of JSON): loaded as a
 * checkpoint of a small net it is refused at once, before it is parsed (a
 * checkpoint of that net needs a header of at most 64 KiB + 1 KiB per
 * tensor); parsed on its own, it is answered in linear time: once with a
 * duplicate key at the very end (rejected: duplicates are found through
 * jansson's hash table, not by comparing each key with every earlier one,
 * which took 213 s here), once with distinct keys (accepted). */
START_TEST(huge_header_is_linear) {
    enum { N = 200000 };
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
         * 14 MB file is all that happens (a few ms here; the sanitizer build
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
        /* 1.1 to 1.7 s of CPU here (2 shared cores; jansson parses ~12 MB/s
         * on them), where the quadratic reader took 213 s. 20 s leaves room
         * for the sanitizer build and still fails a quadratic reader by a
         * factor of ten. */
        ck_assert_msg(dc < 20.0, "%s header: %.1f s of CPU", dup ? "duplicate" : "distinct", dc);
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

VDT_MAIN("ckpt", 120,
          round_trip_is_exact, layout_is_safetensors_and_torchvision,
          strict_matching_reports_first_mismatch, state_must_belong_to_model,
          corruption_never_crashes, offsets_are_validated, atomic_write_keeps_old_file,
          python_reader_agrees, names_are_escaped_and_utf8, huge_header_is_linear,
          long_paths_keep_the_state_next_to_the_model, metadata_counts_are_strict)
