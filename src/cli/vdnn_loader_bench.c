/* vdnn-loader-bench — how fast the data loader delivers batches for a net,
 * per number of loader threads, so that --loader-threads can be sized; and
 * a generator of photo-like JPEG folders to measure on. Exit status: 0, or
 * the VD_E* code of the error. See man vdnn-train(1), "Loader benchmark" under DATA. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <turbojpeg.h>
#include "cli/cli_common.h"
#include "util/util.h"
#include "net/net.h"
#include "spec/spec.h"
#include "data/data.h"

static const char *const PROG = "vdnn-loader-bench";

static void usage(FILE *f) {
    char nets[3 * PATH_MAX];
    vd_cli_nets_help(nets, sizeof nets);
    fprintf(f,
"usage: vdnn-loader-bench NET.yaml|NAME [--data SPEC] [options]\n"
"       vdnn-loader-bench --make-folder DIR [--count N] [--size WxH] [--quality Q]\n"
"\n"
"Measure the images/s the data loader of vdnn-train delivers for NET.yaml's\n"
"input shape, per number of loader threads (the batches are produced exactly\n"
"as in training, then dropped). Compare with the net's compute rate\n"
"(vdnn-train's \"iteration time (compute only)\") to size --loader-threads.\n"
"\"cpu ms/img\" is the CPU time of the whole process (loader threads and the\n"
"thread taking the batches) per image: unlike images/s, it does not depend on\n"
"what else runs on the machine.\n"
"%s"
"\n"
"  --data SPEC          as vdnn-train (default synthetic)\n"
"  --batch N            batch size (default: the spec's)\n"
"  --threads LIST       comma-separated thread counts (default 1,2,4,... up to\n"
"                       the default of vdnn-train, the cores, at most 16)\n"
"  --batches N          batches timed per thread count (default 8; four more\n"
"                       are taken first and not timed: the loader's ring of\n"
"                       batch buffers is then in use, as in training)\n"
"  --bf16               take the batches as bf16 channels-last, as vdnn-train\n"
"                       --math bf16 does (default: float)\n"
"  --fp16               the same in IEEE half (vdnn-train --math fp16)\n"
"  --augment            random crops and flips, as vdnn-train --augment\n"
"  --jpeg D             folder data: turbo (default: TurboJPEG, reduced DCT scale\n"
"                       where possible), turbo-full (never scaled) or stb\n"
"                       (stb_image, the decoder before libjpeg-turbo)\n"
"  --seed N             seed for the order and augmentation (default 1)\n"
"\n"
"  --make-folder DIR    write DIR/train/c0..c9/NNNNN.jpg: --count N images\n"
"                       (default 1536) of --size WxH (default 500x375), JPEG\n"
"                       quality --quality Q (default 90, 4:2:0), photo-like\n"
"                       content (smooth gradients, edges and fine texture)\n"
"  --help               this text\n"
VD_CLI_LIST_NETS_HELP, nets);
}

static int parse_int(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out,
                     vd_err *e) {
    int64_t x;
    if (!v || vd_parse_i64(v, &x, NULL) != 0 || x < lo || x > hi)
        return vd_errf(e, VD_EUSAGE, "--%s needs an integer in [%lld, %lld] (got '%s')", flag,
                       (long long)lo, (long long)hi, v ? v : "");
    *out = x;
    return VD_OK;
}

/* ---- --make-folder ---------------------------------------------------------- */

/* Photo-like pixels: a few smooth waves and a gradient, two hard edges, and
 * +-19 of per-pixel texture (a hash), so the files are about as large and as
 * slow to decode as camera photos at the same quality. */
static void fill_photo(unsigned char *px, int w, int h, uint64_t seed) {
    uint64_t k = seed * 0x9E3779B97F4A7C15ull + 1;
    double ph[6];
    for (int i = 0; i < 6; i++) {
        k = k * 6364136223846793005ull + 1442695040888963407ull;
        ph[i] = (double)(k >> 11) / 9007199254740992.0 * 6.283185307;
    }
    int ex = (int)((k >> 20) % (uint64_t)w), ey = (int)((k >> 40) % (uint64_t)h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint64_t z = (uint64_t)(y * w + x) * 0xD1B54A32D192ED03ull ^ seed;
            z ^= z >> 29; z *= 0xBF58476D1CE4E5B9ull; z ^= z >> 32;
            for (int c = 0; c < 3; c++) {
                double v = 110 + 50 * sin(x * 0.013 + ph[c]) * cos(y * 0.021 + ph[c + 3]) +
                           30 * sin((x + y) * 0.05 + ph[(c + 1) % 6]) + 40.0 * y / h +
                           (x > ex ? 25 : 0) - (y > ey ? 20 : 0) +
                           (double)((int)((z >> (8 * c)) & 63) - 32) * 0.6;
                px[((size_t)y * w + x) * 3 + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir p unless it is a directory already. VD_EIO naming it. */
static int make_dir(const char *p, vd_err *e) {
    if (mkdir(p, 0755) != 0 && !is_dir(p))
        return vd_errf(e, VD_EIO, "%s: cannot create directory: %s", p, strerror(errno));
    return VD_OK;
}

/* Write a new file p (never one that exists: a link or anything else there
 * is refused) holding data[0..n). VD_EIO naming it. */
static int write_new(const char *p, const void *data, size_t n, vd_err *e) {
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return vd_errf(e, VD_EIO, "%s: cannot create: %s%s", p, strerror(errno),
                       errno == EEXIST ? " (--make-folder writes into a new or empty "
                       "directory, never over a file)" : "");
    int rc = vd_write_all(fd, data, n, p, e);
    if (close(fd) != 0 && !rc) rc = vd_errf(e, VD_EIO, "%s: close failed: %s", p, strerror(errno));
    if (rc) unlink(p);
    return rc;
}

static int make_folder(const char *dir, int64_t count, int w, int h, int quality, vd_err *e) {
    char *p = vd_strfmt(e, "%s/train", dir);
    int rc = p ? VD_OK : VD_ENOMEM;
    if (!rc) rc = make_dir(dir, e);
    if (!rc) rc = make_dir(p, e);
    VD_FREE(p);
    for (int c = 0; c < 10 && !rc; c++) {
        if (!(p = vd_strfmt(e, "%s/train/c%d", dir, c))) return VD_ENOMEM;
        rc = make_dir(p, e);
        VD_FREE(p);
    }
    if (rc) return rc;
    unsigned char *px = vd_malloc((size_t)w * h * 3, e);
    if (!px) return VD_ENOMEM;
    tjhandle tj = tjInitCompress();
    if (!tj) { vd_free(px); return vd_errf(e, VD_ENOMEM, "cannot start the JPEG encoder"); }
    uint64_t bytes = 0;
    for (int64_t i = 0; i < count && !rc; i++) {
        fill_photo(px, w, h, (uint64_t)i + 1);
        unsigned char *jpg = NULL;
        unsigned long n = 0;
        if (tjCompress2(tj, px, w, 0, h, TJPF_RGB, &jpg, &n, TJSAMP_420, quality, 0) != 0) {
            rc = vd_errf(e, VD_EINTERNAL, "JPEG encoding failed: %s", tjGetErrorStr2(tj));
            break;
        }
        p = vd_strfmt(e, "%s/train/c%d/%05lld.jpg", dir, (int)(i % 10), (long long)i);
        rc = p ? write_new(p, jpg, n, e) : VD_ENOMEM;
        vd_free(p);
        bytes += n;
        tjFree(jpg);
    }
    tjDestroy(tj);
    vd_free(px);
    if (!rc)
        printf("%s: %lld JPEGs of %dx%d, quality %d, mean %.1f KiB, in %s/train/c0..c9\n", PROG,
               (long long)count, w, h, quality, count ? (double)bytes / count / 1024.0 : 0.0,
               dir);
    return rc;
}

/* ---- the benchmark ------------------------------------------------------------ */

/* CPU seconds of the whole process (all threads). */
static double cpu_now(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Untimed batches first: the loader's ring (up to four batch buffers) is
 * written once (the page faults of their first use are not the steady
 * state of a training run) and the files are in the page cache. */
enum { WARMUP_BATCHES = 4 };

static int bench(const vd_net *net, vd_dataset *ds, int batch, const int *threads, int n_threads,
                 int64_t batches, uint64_t seed, vd_dtype elem, vd_err *e) {
    const vd_data_info *di = vd_data_get_info(ds);
    size_t xf = (size_t)di->c * di->h * di->w * (size_t)batch;
    float *x = vd_malloc(sizeof(float) * xf, e);
    int32_t *y = vd_malloc(sizeof(int32_t) * (size_t)batch, e);
    int rc = x && y ? VD_OK : VD_ENOMEM;
    if (!rc) {
        printf("%s: net %s input %dx%dx%d, batch %d%s, %s\n", PROG, net->name, di->c, di->h,
               di->w, batch,
               elem == VD_DT_BF16 ? " (bf16 channels-last)" : elem == VD_DT_F16 ? " (fp16 channels-last)" : "",
               di->desc);
        if (vd_data_is_synthetic(ds))
            printf("%s: (vdnn-train generates synthetic batches on its backend, not with these "
                   "threads: this is the host loader's rate)\n", PROG);
        printf("  %7s %12s %18s %12s %12s\n", "threads", "images/s", "per thread", "ms/batch",
               "cpu ms/img");
    }
    for (int t = 0; t < n_threads && !rc; t++) {
        vd_loader *ld;
        vd_loader_cfg cfg = { .split = VD_SPLIT_TRAIN, .batch = batch, .shuffle = true,
                              .seed = seed, .start = 0, .threads = threads[t] };
        rc = vd_loader_create(&ld, ds, &cfg, e);
        if (rc) break;
        for (int b = 0; b < WARMUP_BATCHES && !rc; b++)
            rc = vd_loader_next_as(ld, x, elem, elem != VD_DT_F32, y, e);
        double t0 = vd_now(), c0 = cpu_now();
        for (int64_t b = 0; b < batches && !rc; b++)
            rc = vd_loader_next_as(ld, x, elem, elem != VD_DT_F32, y, e);
        double dt = vd_now() - t0, dc = cpu_now() - c0;
        vd_loader_destroy(&ld);
        if (rc) break;
        double ips = dt > 0 ? (double)batches * batch / dt : 0;
        printf("  %7d %12.1f %18.1f %12.2f %12.3f\n", threads[t], ips, ips / threads[t],
               1e3 * dt / (double)batches, 1e3 * dc / ((double)batches * batch));
        fflush(stdout);
    }
    vd_free(x);
    vd_free(y);
    return rc;
}

typedef struct opts {
    const char *spec, *data, *make;
    char spec_found[PATH_MAX];  /* spec's file, when found by its name */
    int64_t batch, batches, seed, count, quality, w, h;
    bool augment;
    vd_dtype dt;                /* --bf16, --fp16: the last one given */
    bool has_jpeg;
    vd_jpeg_decoder dec;        /* --jpeg */
    int th[32], nth;            /* --threads, else 1, 2, 4, ... up to the default */
} opts;

/* --threads LIST: comma-separated counts. */
static int parse_threads(const char *list, opts *o, vd_err *e) {
    for (const char *p = list; *p;) {
        char buf[16];
        size_t len = strcspn(p, ",");
        int64_t t = 0;
        if (o->nth == (int)VD_ARRAY_LEN(o->th) || len == 0 || len >= sizeof buf)
            return vd_errf(e, VD_EUSAGE, "--threads %s: a list of up to 32 counts, e.g. "
                           "1,2,4,8", list);
        memcpy(buf, p, len);
        buf[len] = 0;
        int rc = parse_int("threads", buf, 1, 256, &t, e);
        if (rc) return rc;
        o->th[o->nth++] = (int)t;
        p += len;
        if (*p == ',') p++;
    }
    return VD_OK;
}

static int parse_jpeg(const char *v, opts *o, vd_err *e) {
    o->has_jpeg = true;
    if (!strcmp(v, "turbo")) o->dec = VD_JPEG_TURBO;
    else if (!strcmp(v, "turbo-full")) o->dec = VD_JPEG_TURBO_FULL;
    else if (!strcmp(v, "stb")) o->dec = VD_JPEG_STB;
    else return vd_errf(e, VD_EUSAGE, "--jpeg %s: expected turbo, turbo-full or stb", v);
    return VD_OK;
}

/* Returns VD_OK, an error, or -1 after --help. */
static int parse_args(int argc, char **argv, opts *o, vd_err *e) {
    *o = (opts){ .batches = 8, .seed = 1, .count = 1536, .quality = 90, .w = 500, .h = 375,
                 .dt = VD_DT_F32, .dec = VD_JPEG_TURBO };
    const char *threads = NULL, *jpeg = NULL;
    int rc = VD_OK;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) { usage(stdout); return -1; }
        else if (!strcmp(a, "--list-nets")) { rc = vd_cli_list_nets(e); return rc ? rc : -1; }
        else if (!strcmp(a, "--augment")) o->augment = true;
        else if (!strcmp(a, "--bf16")) o->dt = VD_DT_BF16;
        else if (!strcmp(a, "--fp16")) o->dt = VD_DT_F16;
        else if (a[0] != '-' || !a[1]) {
            if (o->spec) rc = vd_errf(e, VD_EUSAGE, "more than one NET.yaml ('%s', '%s')", o->spec, a);
            o->spec = a;
        } else if (!v) rc = vd_errf(e, VD_EUSAGE, "%s needs a value", a);
        else {
            i++;
            if (!strcmp(a, "--data")) o->data = v;
            else if (!strcmp(a, "--threads")) threads = v;
            else if (!strcmp(a, "--jpeg")) jpeg = v;
            else if (!strcmp(a, "--make-folder")) o->make = v;
            else if (!strcmp(a, "--batch")) rc = parse_int("batch", v, 1, 1 << 20, &o->batch, e);
            else if (!strcmp(a, "--batches")) rc = parse_int("batches", v, 1, 1 << 30, &o->batches, e);
            else if (!strcmp(a, "--seed")) rc = parse_int("seed", v, 0, INT64_MAX, &o->seed, e);
            else if (!strcmp(a, "--count")) rc = parse_int("count", v, 1, 1 << 24, &o->count, e);
            else if (!strcmp(a, "--quality")) rc = parse_int("quality", v, 1, 100, &o->quality, e);
            else if (!strcmp(a, "--size")) {
                int ww, hh;
                char tail;
                if (sscanf(v, "%dx%d%c", &ww, &hh, &tail) != 2 || ww < 1 || hh < 1 ||
                    ww > 16384 || hh > 16384)
                    rc = vd_errf(e, VD_EUSAGE, "--size needs WxH, e.g. 500x375 (got '%s')", v);
                o->w = ww;
                o->h = hh;
            } else {
                rc = vd_errf(e, VD_EUSAGE, "unknown option %s (see --help)", a);
            }
        }
    }
    if (rc || o->make) return rc;
    if (!o->spec) {
        usage(stderr);
        return vd_errf(e, VD_EUSAGE, "missing NET.yaml");
    }
    bool installed;
    if ((rc = vd_cli_find_net(o->spec, o->spec_found, sizeof o->spec_found, &o->spec,
                              &installed, e)))
        return rc;
    if (installed) fprintf(stderr, "%s: net %s\n", PROG, o->spec);
    if (jpeg && (rc = parse_jpeg(jpeg, o, e))) return rc;
    if (threads) return parse_threads(threads, o, e);
    int max = vd_loader_default_threads();
    for (int t = 1; t < max; t *= 2) o->th[o->nth++] = t;
    o->th[o->nth++] = max;
    return VD_OK;
}

int main(int argc, char **argv) {
    opts o;
    vd_err e = { 0 };
    int rc = parse_args(argc, argv, &o, &e);
    if (rc < 0) return 0;
    if (!rc && o.make) rc = make_folder(o.make, o.count, (int)o.w, (int)o.h, (int)o.quality, &e);
    if (rc || o.make) return rc ? vd_cli_fail(PROG, &e) : 0;
    vd_net net;
    vd_net_init(&net);
    vd_dataset *ds = NULL;
    rc = vd_spec_load(o.spec, &net, &e);
    int b = o.batch ? (int)o.batch : net.train.batch > 0 ? net.train.batch : 64;
    if (!rc) rc = vd_data_open(o.data, &net, b, (uint64_t)o.seed, o.augment, &ds, &e);
    if (!rc && o.has_jpeg) rc = vd_data_set_jpeg_decoder(ds, o.dec, &e);
    if (!rc) rc = bench(&net, ds, b, o.th, o.nth, o.batches, (uint64_t)o.seed, o.dt, &e);
    vd_data_close(&ds);
    vd_net_free(&net);
    return rc ? vd_cli_fail(PROG, &e) : 0;
}
