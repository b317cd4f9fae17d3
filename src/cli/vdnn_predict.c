/* vdnn-predict — classify image files, or the held-out split of a data set,
 * with a trained net: the top k classes of each image and their
 * probabilities, one line per image on stdout (a table, or JSON lines).
 * Notes and errors go to stderr. Exit status: 0, the VD_E* code of the
 * error, or, when some images could not be classified (the others were),
 * the first one's (5: cannot be decoded, 4: cannot be read). See
 * man vdnn-predict(1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli_common.h"
#include "util/util.h"
#include "util/json.h"
#include "config/predict_job.h"

static const char *const PROG = "vdnn-predict";

static void usage(FILE *f) {
    char nets[3 * PATH_MAX];
    vd_cli_nets_help(nets, sizeof nets);
    fprintf(f,
"usage: vdnn-predict NET.yaml|NAME --init FILE [options] IMAGE...\n"
"       vdnn-predict NET.yaml|NAME --init FILE --data SPEC [options]\n"
"%s"
"\n"
"Classify image files (.jpg .jpeg .png .bmp .ppm .pgm) with the net of NET.yaml\n"
"(see vdnn-net(5)) and the weights of FILE: each image's top classes and their\n"
"probabilities (the softmax of the net's output), one line per image. Images are\n"
"transformed as vdnn-train's folder:DIR data transforms its held-out images\n"
"(resized to cover the input / 0.875, centre-cropped, normalised with the spec's\n"
"data.normalize, else ImageNet's mean and std). Class\n"
"names: those FILE records (vdnn-train records folder:DIR's class directories),\n"
"else the class index. An image that cannot be read or decoded gets a line that\n"
"says why; the others are still classified, and the exit status is 5 (4: it\n"
"could not be read).\n"
"\n"
"Input:\n"
"  --init FILE          the weights: a safetensors checkpoint (vdnn-train --save, or\n"
"                       a PyTorch state_dict in safetensors); required\n"
"  --data SPEC          instead of image files: every image of the held-out split of\n"
"                       mnist:DIR | cifar10:DIR | folder:DIR | synthetic[:TRAIN[,TEST]]\n"
"                       (as vdnn-train --data), each line with its true label, and\n"
"                       the top-1 and top-k accuracy at the end\n"
"  --loader-threads N   --data: loader threads (default: the cores, at most 16)\n"
"  --                   every argument after it is an image file\n"
"\n"
"Output:\n"
"  --top-k N            classes per image, most probable first (default 5; at most\n"
"                       the net's classes)\n"
"  --format F           table | jsonl (one JSON object per line; default table)\n"
"  --labels FILE        class names, one a line, one per class of the net (over the\n"
"                       names FILE records)\n"
"  --quiet              no notes on stderr (warnings and errors still)\n"
"\n"
"Run (inference plan: forward only, each feature map freed after its last reader;\n"
"see vdnn-plan(1) for the shared options):\n"
"  --batch N            images per forward pass (default: the spec's train.batch,\n"
"                       at most the number of image files)\n"
"  --budget SIZE        device memory pool, e.g. 2G (default: what the plan needs,\n"
"                       within what the device can give); too small for the whole\n"
"                       batch: the large layers run in batch chunks (the fewest\n"
"                       that fit), and maps waiting for a later reader (a\n"
"                       residual add, a concat) go to pinned host memory and\n"
"                       back where that fits with fewer chunks or runs faster;\n"
"                       too small even so: exit 6, with the smallest budget that\n"
"                       fits\n"
"  --profile FILE       plan with this profile (vdnn-plan(1)) instead of measuring\n"
"  --analytic-profile   plan with the analytic profile (no measuring pass)\n"
"  --profile-out FILE   write the profile used to FILE\n"
"  --backend B          cpu | cuda | auto (default: auto = cuda if available)\n"
"  --device N           CUDA device index (default 0)\n"
"  --math M             fp32 | tf32 | bf16 | fp16 (default: the spec's train.math,\n"
"                       else fp32; bf16 and fp16 round the probabilities to 16 bits)\n"
"  --deterministic      deterministic algorithms only\n"
"  --conv-tune T, --conv-api A, --conv-split S, --conv-topk N, --conv-rtc,\n"
"  --conv-debug N, --no-fuse, --sync-debug\n"
"                       the CUDA backend's options, as in vdnn-train(1)\n"
"  --help               this text\n"
"  --version            version and build features\n"
VD_CLI_LIST_NETS_HELP
"\n"
"Exit status: 0 ok, 2 usage (--labels whose count is not the net's classes too),\n"
"3 spec, 4 io (an image that cannot be read), 5 data (an image that cannot be\n"
"decoded, a corrupt checkpoint), 6 budget, 7 device, 8 unsupported, 9 nomem,\n"
"130 / 143 / 129 stopped by SIGINT / SIGTERM / SIGHUP.\n", nets);
}

/* ---- options ------------------------------------------------------------- */

typedef struct opts {
    vd_cli_common c;            /* NET.yaml and the run setup */
    vd_predict_opts p;
    const char **images;        /* [n_images] (vd_realloc'ed) */
    int n_images, cap_images;
    bool jsonl;                 /* --format jsonl */
} opts;

static const vd_cli_flag FLAGS[] = {
    {"init", true}, {"data", true}, {"loader-threads", true}, {"top-k", true},
    {"format", true}, {"labels", true}, {"quiet", false}, {"batch", true}, {"budget", true},
    {"profile", true}, {"analytic-profile", false}, {"profile-out", true}, {"backend", true},
    {"device", true}, {"math", true}, {"deterministic", false}, {"conv-tune", true},
    {"conv-api", true}, {"conv-split", true}, {"conv-topk", true}, {"conv-rtc", false},
    {"conv-debug", true}, {"no-fuse", false}, {"sync-debug", false}, {"help", false}, {"version", false},
    {"list-nets", false},
};

/* vdnn-predict's own flags (vd_cli_tool_flag; ctx is the opts). */
static int predict_flag(void *ctx, const char *name, const char *val, vd_err *e) {
    opts *o = ctx;
    int64_t x;
    int rc = VD_OK;
    if (!strcmp(name, "init")) o->p.init = val;
    else if (!strcmp(name, "data")) o->p.data = val;
    else if (!strcmp(name, "labels")) o->p.labels = val;
    else if (!strcmp(name, "top-k")) {
        if (!(rc = vd_cli_int(name, val, 1, 1 << 24, &x, e))) o->p.top_k = (int)x;
    } else if (!strcmp(name, "loader-threads")) {
        if (!(rc = vd_cli_int(name, val, 1, 256, &x, e))) o->p.loader_threads = (int)x;
    } else if (!strcmp(name, "format")) {
        static const char *const ch[] = { "table", "jsonl" };
        if (!(rc = vd_cli_choice(name, val, ch, 2, e))) o->jsonl = !strcmp(val, "jsonl");
    }
    return rc;
}

/* An image file (vd_cli_tool_arg). */
static int predict_image(void *ctx, const char *arg, vd_err *e) {
    opts *o = ctx;
    if (o->n_images == o->cap_images) {
        int cap = o->cap_images ? 2 * o->cap_images : 16;
        const char **v = vd_realloc(o->images, sizeof *v * (size_t)cap, e);
        if (!v) return VD_ENOMEM;
        o->images = v;
        o->cap_images = cap;
    }
    o->images[o->n_images++] = arg;
    return VD_OK;
}

/* Returns VD_OK, an error, or -1 for --help / --version (already printed). */
static int parse_args(int argc, char **argv, opts *o, vd_err *e) {
    memset(o, 0, sizeof *o);
    o->p.top_k = 5;
    int rc = vd_cli_parse_args(argc, argv, PROG, usage, FLAGS, (int)VD_ARRAY_LEN(FLAGS), &o->c,
                               predict_flag, predict_image, o, e);
    if (rc) return rc;
    o->p.spec = o->c.spec;
    o->p.cfg = o->c.cfg;
    o->p.images = o->images;
    o->p.n_images = o->n_images;
    if (o->p.loader_threads && !o->p.data)
        return vd_errf(e, VD_EUSAGE, "--loader-threads is for --data");
    return VD_OK;
}

/* ---- output ---------------------------------------------------------------- */

typedef struct out {
    const opts *o;
    const vd_predict_job *j;
    int w_image, w_class;       /* table column widths */
} out;

/* Class c as printed: its name, else its index. */
static const char *class_str(const vd_predict_job *j, int c, char *buf, size_t n) {
    const char *name = vd_predict_class_name(j, c);
    if (name) return name;
    snprintf(buf, n, "%d", c);
    return buf;
}

static void on_note(const char *msg, bool warning, void *ctx) {
    const out *u = ctx;
    if (warning) fprintf(stderr, "%s: warning: %s\n", PROG, msg);
    else if (!u->o->c.quiet) fprintf(stderr, "%s: %s\n", PROG, msg);
}

static void on_planning(vd_plan_opts *po, void *ctx) {
    const out *u = ctx;
    vd_cli_plan_progress(po, PROG, u->o->c.quiet);
}

/* One JSON object on a line of stdout (jansson's block freed here). */
static void put_json(json_t *o) {
    char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9))
                   : NULL;
    json_decref(o);
    if (!line) {
        fprintf(stderr, "%s: error: out of memory writing a result\n", PROG);
        exit(VD_ENOMEM);
    }
    puts(line);
    json_free_t jfree;
    json_get_alloc_funcs(NULL, &jfree);
    jfree(line);
}

static void result_jsonl(const out *u, const vd_predict_result *r) {
    const vd_predict_job *j = u->j;
    char b[32];
    bool ok = true;
    json_t *o = json_object();
    if (r->image) vd_json_set(o, "image", vd_json_text(r->image), &ok);
    else vd_json_set(o, "index", json_integer(r->index), &ok);
    if (r->label >= 0) {
        vd_json_set(o, "label", vd_json_text(class_str(j, r->label, b, sizeof b)), &ok);
        vd_json_set(o, "label_index", json_integer(r->label), &ok);
    }
    if (r->rc) {
        vd_json_set(o, "error", vd_json_text(r->error), &ok);
    } else {
        json_t *top = json_array();
        for (int q = 0; q < r->k; q++) {
            int c = r->top[q];
            vd_json_push(top, json_pack("{s:o, s:i, s:o}", "class",
                                        vd_json_text(class_str(j, c, b, sizeof b)), "index", c,
                                        "prob", vd_json_real(r->probs[c])), &ok);
        }
        vd_json_set(o, "top", top, &ok);
    }
    if (!ok) { json_decref(o); o = NULL; }
    put_json(o);
}

static void result_table(const out *u, const vd_predict_result *r) {
    const vd_predict_job *j = u->j;
    char b[32];
    if (r->image) printf("%-*s", u->w_image, r->image);
    else printf("%-*lld", u->w_image, (long long)r->index);
    if (j->ds)   /* the true label ("?": an image that failed) */
        printf("  %-*s", u->w_class, r->label >= 0 ? class_str(j, r->label, b, sizeof b) : "?");
    if (r->rc) {
        printf("  error: %s\n", r->error);
        return;
    }
    for (int q = 0; q < r->k; q++) {
        int c = r->top[q];
        printf("  %-*s %.4f", u->w_class, class_str(j, c, b, sizeof b), (double)r->probs[c]);
    }
    printf("\n");
}

static void on_result(const vd_predict_result *r, void *ctx) {
    const out *u = ctx;
    if (u->o->jsonl) result_jsonl(u, r);
    else result_table(u, r);
}

/* The table's header line and column widths. */
static void table_header(out *u) {
    const vd_predict_job *j = u->j;
    char b[32];
    u->w_image = 5;   /* the header's "index" or "image" */
    if (j->ds) {
        int d = snprintf(b, sizeof b, "%lld", (long long)(j->n_images - 1));
        if (d > u->w_image) u->w_image = d;
    }
    for (int i = 0; i < u->o->n_images; i++) {
        int l = (int)strlen(u->o->images[i]);
        if (l > u->w_image) u->w_image = l;
    }
    u->w_class = 5;   /* "top-1" */
    for (int c = 0; c < j->net.classes; c++) {
        int l = (int)strlen(class_str(j, c, b, sizeof b));
        if (l > u->w_class) u->w_class = l;
    }
    printf("%-*s", u->w_image, j->ds ? "index" : "image");
    if (j->ds) printf("  %-*s", u->w_class, "label");
    for (int q = 0; q < j->k; q++) {
        snprintf(b, sizeof b, "top-%d", q + 1);
        printf("  %-*s %s%s", u->w_class, b, "prob", q + 1 < j->k ? "  " : "");   /* 1.0000 */
    }
    printf("\n");
}

/* --data: the accuracy over the classified images. */
static void summary(const out *u) {
    const vd_predict_job *j = u->j;
    double n = (double)(j->n_done ? j->n_done : 1);
    if (u->o->jsonl) {
        json_t *s = json_pack("{s:{s:I, s:I, s:o, s:i, s:o}}", "summary", "images",
                              (json_int_t)j->n_done, "failed", (json_int_t)j->n_failed, "top1",
                              vd_json_real((double)j->hits1 / n), "k", j->k, "top_k",
                              vd_json_real((double)j->hits_k / n));
        put_json(s);
        return;
    }
    printf("accuracy: top-1 %.2f%% (%lld of %lld)", 100.0 * (double)j->hits1 / n,
           (long long)j->hits1, (long long)j->n_done);
    if (j->k > 1)
        printf(", top-%d %.2f%% (%lld of %lld)", j->k, 100.0 * (double)j->hits_k / n,
               (long long)j->hits_k, (long long)j->n_done);
    if (j->n_failed)
        printf("; %lld image%s not classified", (long long)j->n_failed, j->n_failed == 1 ? "" : "s");
    printf("\n");
}

/* The plan on stderr (unless quiet). */
static void plan_note(const vd_predict_job *j, bool quiet) {
    vd_cli_warn_auto_cpu(PROG, &j->ses, j->plan.sim.iter_s,
                         (j->n_images + j->run.batch - 1) / j->run.batch);
    if (quiet) return;
    char b1[32], b2[32], sp[VD_NAME_MAX * 2 + 96];
    fprintf(stderr, "%s: %s, %lld image%s in batches of %d; plan: forward only, pool %s "
            "(peak %s), predicted %.3f ms per batch (%s)\n", PROG, j->net.name,
            (long long)j->n_images, j->n_images == 1 ? "" : "s", j->run.batch,
            vd_fmt_bytes(j->plan.budget, b1, sizeof b1),
            vd_fmt_bytes(j->plan.live_peak, b2, sizeof b2), 1e3 * j->plan.sim.iter_s,
            j->ses.prof.source);
    if (j->plan.n_units != j->plan.n_layers)   /* the budget needs split layers */
        fprintf(stderr, "%s: plan: split layers: %s\n", PROG,
                vd_plan_split_summary(&j->plan, &j->net, sp, sizeof sp));
    int n_off = 0;
    for (int t = 0; t < j->plan.n_tensors; t++) n_off += j->plan.tensors[t].offload;
    if (n_off)   /* the budget needs maps offloaded between their readers */
        fprintf(stderr, "%s: plan: offloads %d map%s between their readers (%s to pinned host "
                "memory and back per batch)\n", PROG, n_off, n_off == 1 ? "" : "s",
                vd_fmt_bytes(j->plan.offload_bytes, b1, sizeof b1));
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    opts o;
    vd_err e = {0};
    int rc = parse_args(argc, argv, &o, &e);
    if (rc < 0) { vd_free(o.images); return 0; }
    if (rc) { vd_free(o.images); return vd_cli_fail(PROG, &e); }
    o.p.stop = vd_cli_catch_stop();
    out u = { .o = &o };
    vd_predict_hooks hooks = { .note = on_note, .planning = on_planning, .result = on_result,
                               .ctx = &u };
    vd_predict_job j;
    u.j = &j;
    rc = vd_predict_job_open(&j, &o.p, &hooks, &e);
    if (!rc) {
        plan_note(&j, o.c.quiet);
        if (!o.jsonl) table_header(&u);
        rc = vd_predict_job_run(&j, &e);
    }
    if (!rc && j.ds) summary(&u);
    if (fflush(stdout) != 0 && !rc) rc = vd_errf(&e, VD_EIO, "cannot write the results");
    if (!rc && j.n_failed) {
        fprintf(stderr, "%s: %lld of %lld image%s could not be classified (exit status %d)\n",
                PROG, (long long)j.n_failed, (long long)j.n_images, j.n_images == 1 ? "" : "s",
                j.first_rc);
        rc = j.first_rc;
    } else if (rc == VD_ESTOP) {
        rc = vd_cli_stopped(PROG, &e);
    } else if (rc) {
        rc = vd_cli_fail(PROG, &e);
    }
    vd_predict_job_close(&j);
    vd_free(o.images);
    return rc;
}
