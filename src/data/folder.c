/* folder.c — ImageNet-style image folders, decoded with stb_image.
 *
 * DIR/train/<class>/<image> and (optional) DIR/val/<class>/<image>; images
 * are .jpg .jpeg .png .bmp .ppm .pgm (case-insensitive), anything else is
 * skipped. Classes are the train subdirectories sorted by name (byte order);
 * label = index in that list. A val class that has no train directory is an
 * error.
 *
 * Each image is decoded to the net's channel count (1 or 3), scaled so that
 * it covers the net input (for a square input: shorter side = input size)
 * with bilinear interpolation (half-pixel centres, no antialiasing), then
 * center-cropped. With augment, train images take a uniformly random crop
 * position instead and are flipped horizontally with probability 1/2, keyed
 * by (seed, sample counter). */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stb/stb_image.h>
#include "data/data_impl.h"

typedef struct item { char *path; int32_t label; } item;

typedef struct folder {
    int n_classes;
    char **classes;             /* [n_classes] sorted names */
    item *items[2];             /* [info.n[split]] */
    int64_t cap[2];
} folder;

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_image(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    static const char *const ext[] = { "jpg", "jpeg", "png", "bmp", "ppm", "pgm" };
    for (size_t i = 0; i < VD_ARRAY_LEN(ext); i++) {
        const char *a = dot + 1, *b = ext[i];
        while (*a && *b && tolower((unsigned char)*a) == *b) { a++; b++; }
        if (!*a && !*b) return true;
    }
    return false;
}

/* List entries of dir (names, sorted) for which keep(full path, name) holds. */
static int list_dir(const char *dir, bool want_dirs, char ***out, int64_t *n, vd_err *e) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return vd_errf(e, VD_EIO, "%s: cannot open directory", dir);
    int64_t cap = 0;
    char **v = NULL;
    int rc = VD_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char full[4200];
        snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (want_dirs ? !S_ISDIR(st.st_mode) : !(S_ISREG(st.st_mode) && is_image(de->d_name)))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = vd_realloc(v, sizeof(char *) * (size_t)cap, e);
            if (!nv) { rc = VD_ENOMEM; break; }
            v = nv;
        }
        v[*n] = vd_strdup(de->d_name, e);
        if (!v[*n]) { rc = VD_ENOMEM; break; }
        (*n)++;
    }
    closedir(d);
    if (rc) {
        for (int64_t i = 0; i < *n; i++) free(v[i]);
        free(v);
        *n = 0;
        return rc;
    }
    if (*n) qsort(v, (size_t)*n, sizeof(char *), cmp_str);
    *out = v;
    return VD_OK;
}

static void free_names(char **v, int64_t n) {
    for (int64_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

static int add_item(folder *f, int split, int64_t *n, char *path, int32_t label, vd_err *e) {
    if (*n == f->cap[split]) {
        int64_t cap = f->cap[split] ? f->cap[split] * 2 : 1024;
        item *ni = vd_realloc(f->items[split], sizeof(item) * (size_t)cap, e);
        if (!ni) { free(path); return VD_ENOMEM; }
        f->items[split] = ni;
        f->cap[split] = cap;
    }
    f->items[split][*n].path = path;
    f->items[split][*n].label = label;
    (*n)++;
    return VD_OK;
}

static int scan_split(folder *f, int split, const char *root, int64_t *n, vd_err *e) {
    char **cls;
    int64_t nc;
    int rc = list_dir(root, true, &cls, &nc, e);
    if (rc) return rc;
    for (int64_t c = 0; c < nc && !rc; c++) {
        int32_t label = -1;
        for (int k = 0; k < f->n_classes; k++)
            if (strcmp(f->classes[k], cls[c]) == 0) label = k;
        if (label < 0) {
            rc = vd_errf(e, VD_EDATA, "%s/%s: class directory has no counterpart in the "
                         "train directory", root, cls[c]);
            break;
        }
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%s", root, cls[c]);
        char **files;
        int64_t nf;
        rc = list_dir(sub, false, &files, &nf, e);
        for (int64_t i = 0; i < nf && !rc; i++) {
            size_t len = strlen(sub) + strlen(files[i]) + 2;
            char *p = vd_malloc(len, e);
            if (!p) { rc = VD_ENOMEM; break; }
            snprintf(p, len, "%s/%s", sub, files[i]);
            rc = add_item(f, split, n, p, label, e);
        }
        free_names(files, nf);
    }
    free_names(cls, nc);
    return rc;
}

static float bilerp(const unsigned char *img, int iw, int ih, int nc, int ch, float sx, float sy) {
    if (sx < 0) sx = 0;
    if (sy < 0) sy = 0;
    if (sx > (float)(iw - 1)) sx = (float)(iw - 1);
    if (sy > (float)(ih - 1)) sy = (float)(ih - 1);
    int x0 = (int)sx, y0 = (int)sy;
    int x1 = x0 + 1 < iw ? x0 + 1 : x0, y1 = y0 + 1 < ih ? y0 + 1 : y0;
    float fx = sx - (float)x0, fy = sy - (float)y0;
    float a = img[((size_t)y0 * iw + x0) * nc + ch], b = img[((size_t)y0 * iw + x1) * nc + ch];
    float c = img[((size_t)y1 * iw + x0) * nc + ch], d = img[((size_t)y1 * iw + x1) * nc + ch];
    return (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy;
}

static int folder_sample(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                         float *x, int32_t *label, vd_err *e) {
    const folder *f = ds->impl;
    const item *it = &f->items[split][index];
    int C = ds->info.c, H = ds->info.h, W = ds->info.w;
    int iw, ih, comp;
    int rc = vd_image_check_header(it->path, NULL, NULL, e);   /* the pixel limit first */
    if (rc) return rc;
    unsigned char *img = stbi_load(it->path, &iw, &ih, &comp, C);
    if (!img) return vd_image_decode_error(it->path, stbi_failure_reason(), e);
    if (iw < 1 || ih < 1) {
        stbi_image_free(img);
        return vd_errf(e, VD_EDATA, "%s: empty image", it->path);
    }
    /* scale so the image covers H x W */
    double s = fmax((double)H / ih, (double)W / iw);
    int rh = (int)lround(ih * s), rw = (int)lround(iw * s);
    if (rh < H) rh = H;
    if (rw < W) rw = W;
    int y0 = (rh - H) / 2, x0 = (rw - W) / 2;
    bool flip = false;
    if (ds->augment && split == VD_SPLIT_TRAIN) {
        uint64_t k = vd_mix64(ds->seed ^ vd_mix64(aug_key ^ 0xA06A06A06ull));
        y0 = (int)(k % (uint64_t)(rh - H + 1));
        k = vd_mix64(k);
        x0 = (int)(k % (uint64_t)(rw - W + 1));
        flip = (vd_mix64(k) >> 63) != 0;
    }
    static const float mean3[3] = { 0.485f, 0.456f, 0.406f }, std3[3] = { 0.229f, 0.224f, 0.225f };
    float sx_scale = (float)iw / (float)rw, sy_scale = (float)ih / (float)rh;
    for (int ch = 0; ch < C; ch++) {
        float m = C == 3 ? mean3[ch] : 0.449f, sd = C == 3 ? std3[ch] : 0.226f;
        for (int oy = 0; oy < H; oy++) {
            float sy = ((float)(oy + y0) + 0.5f) * sy_scale - 0.5f;
            for (int ox = 0; ox < W; ox++) {
                int rx = flip ? (W - 1 - ox) : ox;
                float sx = ((float)(rx + x0) + 0.5f) * sx_scale - 0.5f;
                float v = bilerp(img, iw, ih, C, ch, sx, sy);
                x[((size_t)ch * H + oy) * W + ox] = (v / 255.0f - m) / sd;
            }
        }
    }
    stbi_image_free(img);
    *label = it->label;
    return VD_OK;
}

static void folder_close(vd_dataset *ds) {
    folder *f = ds->impl;
    if (!f) return;
    for (int s = 0; s < 2; s++) {
        for (int64_t i = 0; i < ds->info.n[s]; i++) free(f->items[s][i].path);
        free(f->items[s]);
    }
    free_names(f->classes, f->n_classes);
    VD_FREE(ds->impl);
}

int vd_data_open_folder(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e) {
    if (net->in_c != 1 && net->in_c != 3)
        return vd_errf(e, VD_EUSAGE, "folder:%s gives 1- or 3-channel images but net '%s' "
                       "expects %d channels", dir, net->name, net->in_c);
    folder *f = vd_calloc(1, sizeof *f, e);
    if (!f) return VD_ENOMEM;
    ds->impl = f;
    ds->close = folder_close;
    ds->sample = folder_sample;
    char root[4200];
    snprintf(root, sizeof root, "%s/train", dir);
    int64_t nc;
    int rc = list_dir(root, true, &f->classes, &nc, e);
    if (rc) {
        if (rc == VD_EIO)
            rc = vd_errf(e, VD_EIO, "%s: cannot open directory (folder:DIR needs "
                         "DIR/train/<class>/*.jpg)", root);
        folder_close(ds);
        return rc;
    }
    f->n_classes = (int)nc;
    if (nc == 0) {
        folder_close(ds);
        return vd_errf(e, VD_EDATA, "%s: no class subdirectories", root);
    }
    rc = scan_split(f, VD_SPLIT_TRAIN, root, &ds->info.n[VD_SPLIT_TRAIN], e);
    if (!rc && ds->info.n[VD_SPLIT_TRAIN] == 0)
        rc = vd_errf(e, VD_EDATA, "%s: no images (.jpg .jpeg .png .bmp .ppm .pgm) in the "
                     "class directories", root);
    if (!rc) {
        snprintf(root, sizeof root, "%s/val", dir);
        struct stat st;
        if (stat(root, &st) == 0 && S_ISDIR(st.st_mode))
            rc = scan_split(f, VD_SPLIT_TEST, root, &ds->info.n[VD_SPLIT_TEST], e);
    }
    /* every image's header now, not at the iteration that meets it */
    for (int sp = 0; sp < 2 && !rc; sp++)
        for (int64_t i = 0; i < ds->info.n[sp] && !rc; i++)
            rc = vd_image_check_header(f->items[sp][i].path, NULL, NULL, e);
    if (!rc) {
        char what[4300];
        snprintf(what, sizeof what, "folder:%s", dir);
        rc = vd_data_check_shape(what, net->in_c, net->in_h, net->in_w, f->n_classes, net, e);
    }
    if (rc) { folder_close(ds); return rc; }
    ds->info.c = net->in_c;
    ds->info.h = net->in_h;
    ds->info.w = net->in_w;
    ds->info.classes = f->n_classes;
    snprintf(ds->info.desc, sizeof ds->info.desc, "folder:%s (%d classes, %lld train, "
             "%lld val)", dir, f->n_classes, (long long)ds->info.n[0], (long long)ds->info.n[1]);
    return VD_OK;
}
