/* predict_job.c — see predict_job.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "config/predict_job.h"
#include "spec/spec.h"

__attribute__((format(printf, 3, 4)))
static void say(const vd_predict_job *j, bool warning, const char *fmt, ...) {
    if (!j->hooks || !j->hooks->note) return;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    j->hooks->note(msg, warning, j->hooks->ctx);
}

static int stop_check(const vd_predict_job *j, const char *phase, vd_err *e) {
    return j->o->stop && *j->o->stop ? vd_errf(e, VD_ESTOP, "stopped %s", phase) : VD_OK;
}

void vd_predict_topk(const float *probs, int n, int k, int *top) {
    int have = 0;
    for (int c = 0; c < n; c++) {   /* insertion into the k best so far: O(n k) */
        int at = have;
        while (at > 0 && probs[c] > probs[top[at - 1]]) at--;   /* strictly: ties keep order */
        if (at >= k) continue;
        for (int q = (have < k ? have : k - 1); q > at; q--) top[q] = top[q - 1];
        top[at] = c;
        if (have < k) have++;
    }
}

const char *vd_predict_class_name(const vd_predict_job *j, int i) {
    if (i < 0 || i >= j->net.classes) return NULL;
    if (j->label_names) return j->label_names[i];
    if (j->ckpt_names.n) return i < j->ckpt_names.n ? j->ckpt_names.names[i] : NULL;
    const vd_data_info *di = j->ds ? vd_data_get_info(j->ds) : NULL;
    return di && di->class_names && i < di->classes ? di->class_names[i] : NULL;
}

/* --labels FILE: one name a line (a final newline, and a carriage return
 * before each newline, are not part of the names); exactly the net's
 * classes, none empty. */
static int read_labels(vd_predict_job *j, const char *path, vd_err *e) {
    char *text;
    size_t n;
    int rc = vd_read_file(path, &text, &n, e);
    if (rc) return vd_err_prefix(e, "--labels");
    int want = j->net.classes, lines = 0;
    for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
    if (n && text[n - 1] != '\n') lines++;
    if (lines != want) {
        vd_free(text);
        return vd_errf(e, VD_EUSAGE, "--labels %s: %d names (lines), but net '%s' has %d classes",
                       path, lines, j->net.name, want);
    }
    j->label_names = vd_calloc((size_t)want, sizeof *j->label_names, e);
    rc = j->label_names ? VD_OK : VD_ENOMEM;
    char *at = text;
    for (int i = 0; i < want && !rc; i++) {
        char *nl = memchr(at, '\n', n - (size_t)(at - text));
        size_t len = nl ? (size_t)(nl - at) : n - (size_t)(at - text);
        if (len && at[len - 1] == '\r') len--;
        if (len == 0 || memchr(at, '\0', len))
            rc = vd_errf(e, VD_EUSAGE, "--labels %s: line %d is %s", path, i + 1,
                         len ? "not text (a NUL byte)" : "empty (one class name a line)");
        else if (!(j->label_names[i] = vd_strfmt(e, "%.*s", (int)len, at)))
            rc = VD_ENOMEM;
        else
            j->n_label_names = i + 1;
        at = nl ? nl + 1 : at + len;
    }
    vd_free(text);
    return rc;
}

/* No output over an input: --profile-out is the only file written. */
static int check_paths(const vd_predict_job *j, vd_err *e) {
    const vd_predict_opts *o = j->o;
    int n = 6 + o->n_images;
    vd_run_path *rp = vd_calloc((size_t)n, sizeof *rp, e);
    if (!rp) return VD_ENOMEM;
    rp[0] = (vd_run_path){ .flag = "the spec", .path = o->spec };
    rp[1] = (vd_run_path){ .flag = "--profile", .path = o->cfg.profile };
    rp[2] = (vd_run_path){ .flag = "--profile-out", .path = o->cfg.profile_out, .output = true };
    rp[3] = (vd_run_path){ .flag = "--init", .path = o->init };
    rp[4] = (vd_run_path){ .flag = "--labels", .path = o->labels };
    rp[5] = (vd_run_path){ .flag = "--data", .path = vd_data_dir(o->data), .tree = true };
    for (int i = 0; i < o->n_images; i++)
        rp[6 + i] = (vd_run_path){ .flag = "an image", .path = o->images[i] };
    int rc = vd_run_paths_check(rp, n, e);
    vd_free(rp);
    return rc;
}

/* Image files are normalised as folder:DIR's images; a net trained on
 * another kind of data (its FILE.state says which) expects that kind's. */
static void warn_data_kind(const vd_predict_job *j) {
    const vd_predict_opts *o = j->o;
    char *sp = vd_strfmt(NULL, "%s.state", o->init);
    struct stat st;
    bool have = sp && stat(sp, &st) == 0;
    vd_free(sp);
    vd_train_state ts;
    vd_err ignored = {0};   /* a hint: no state, no hint */
    if (!have || vd_ckpt_peek_state(o->init, &j->net, &ts, &ignored) || !ts.data[0] ||
        !strncmp(ts.data, "folder:", 7))
        return;
    say(j, true, "%s was trained on %s; image files are transformed as folder:DIR's images "
        "(ImageNet's mean and std), so its predictions for them may be off; --data classifies "
        "that data's own held-out split", o->init, ts.data);
}

/* Backend, layers, profile, the inference plan and its executor, with the
 * weights uploaded. */
static int set_up(vd_predict_job *j, const float *params, vd_err *e) {
    const vd_predict_opts *o = j->o;
    vd_config_run *run = &j->run;
    run->session.backend_opts.stop = o->stop;
    int rc = vd_session_open(&j->ses, &j->net, run->batch, &run->session, e);
    j->have_ses = rc == VD_OK;
    if (!rc) rc = stop_check(j, "after profiling", e);
    if (rc) return rc;
    if (j->ses.backend_why) say(j, false, "backend %s (auto: %s)", j->ses.be->name, j->ses.backend_why);
    char note[512];
    if (vd_session_profile_note(&j->ses, note, sizeof note)) say(j, false, "note: %s", note);
    vd_config_budget(run, &j->ses, NULL);
    run->plan.forward_only = true;
    run->plan.stop = o->stop;
    if (j->hooks && j->hooks->planning) j->hooks->planning(&run->plan, j->hooks->ctx);
    rc = vd_session_plan(&j->ses, &run->plan, &j->plan, e);
    j->have_plan = rc == VD_OK || rc == VD_EBUDGET;
    if (!rc) rc = vd_session_exec(&j->ses, &j->plan, false, &j->ex, e);
    if (!rc) rc = vd_exec_set_state(j->ex, params, NULL, 0, e);
    return rc;
}

int vd_predict_job_open(vd_predict_job *j, const vd_predict_opts *o,
                        const vd_predict_hooks *hooks, vd_err *e) {
    memset(j, 0, sizeof *j);
    vd_net_init(&j->net);
    j->o = o;
    j->hooks = hooks;
    if (!o->init)
        return vd_errf(e, VD_EUSAGE, "--init FILE is required: the weights to classify with");
    if ((o->n_images > 0) == (o->data != NULL))
        return vd_errf(e, VD_EUSAGE, "%s", o->data ? "give image files or --data, not both"
                       : "nothing to classify: give image files or --data SPEC");
    if (o->top_k < 1) return vd_errf(e, VD_EUSAGE, "--top-k must be at least 1");
    int rc = vd_spec_load(o->spec, &j->net, e);
    if (rc) return rc;
    vd_config cfg = o->cfg;
    if (!cfg.batch && o->n_images) {   /* no pass larger than the images */
        int b = j->net.train.batch > 0 ? j->net.train.batch : VD_CONFIG_DEFAULT_BATCH;
        cfg.batch = b < o->n_images ? b : o->n_images;
    }
    if ((rc = vd_config_resolve(&cfg, &j->net, false, &j->run, e))) return rc;
    if (o->n_images && j->net.in_c != 1 && j->net.in_c != 3)
        return vd_errf(e, VD_EUSAGE, "image files give 1- or 3-channel inputs, but net '%s' "
                       "takes %d channels", j->net.name, j->net.in_c);
    j->k = o->top_k < j->net.classes ? o->top_k : j->net.classes;
    if (o->labels && (rc = read_labels(j, o->labels, e))) return rc;
    if ((rc = check_paths(j, e))) return rc;
    if (o->data) {
        rc = vd_data_open(o->data, &j->net, j->run.batch, j->net.train.seed, false, &j->ds, e);
        if (rc) return rc;
        j->n_images = vd_data_get_info(j->ds)->n[VD_SPLIT_TEST];
        if (j->n_images == 0)
            return vd_errf(e, VD_EUSAGE, "%s has no held-out images (folder:DIR: DIR/val/<class>/)",
                           vd_data_get_info(j->ds)->desc);
    } else {
        j->n_images = o->n_images;
    }
    float *params = vd_malloc(sizeof(float) * (size_t)(j->net.param_floats ? j->net.param_floats : 1), e);
    if (!params) return VD_ENOMEM;
    rc = vd_ckpt_load_model_ex(o->init, &j->net, params, NULL, &j->ckpt_names, e);
    if (rc == VD_EIO) vd_err_prefix(e, "--init");
    if (!rc && o->n_images) warn_data_kind(j);
    if (!rc) rc = stop_check(j, "after loading the weights", e);
    if (!rc) rc = set_up(j, params, e);
    vd_free(params);
    return rc;
}

/* ---- classifying ------------------------------------------------------------ */

/* What one batch needs beside the executor's buffers. */
typedef struct batch_buf {
    float *x;                   /* [batch * sample] floats: image files, a data batch
                                   read sample by sample */
    vd_err *err;                /* [batch] each slot's error (code 0: none) */
    float *probs;               /* [batch * classes] */
    int *top;                   /* [k] */
    int64_t sample;             /* floats per sample */
} batch_buf;

/* Slots [0, n) of the batch (b->x and b->err, labels already in the input
 * buffer): into the executor's input, converted to its element type; the
 * slots that failed or lie past n are zeros. */
static void fill_input(vd_predict_job *j, batch_buf *b, int n) {
    int B = j->run.batch;
    for (int i = 0; i < B; i++)
        if (i >= n || b->err[i].code) memset(b->x + (size_t)i * (size_t)b->sample, 0,
                                             sizeof(float) * (size_t)b->sample);
    vd_dtype dt = vd_exec_input_dtype(j->ex);
    void *x = vd_exec_input_x(j->ex);
    if (!vd_exec_input_nhwc(j->ex)) memcpy(x, b->x, sizeof(float) * (size_t)B * (size_t)b->sample);
    else vd_nchw_f32_to_nhwc(dt, b->x, x, B, j->net.in_c, (int64_t)j->net.in_h * j->net.in_w);
}

/* Run the batch whose first image is `first` (n of them, slots with b->err
 * set failed) and report each, in order. */
static int run_batch(vd_predict_job *j, batch_buf *b, int64_t first, int n, vd_err *e) {
    int ok = 0;
    for (int i = 0; i < n; i++) ok += b->err[i].code == 0;
    if (ok) {   /* an all-failed batch runs nothing */
        vd_eval_counts counts;   /* predict ranks the probabilities itself */
        int rc = vd_exec_eval_step(j->ex, &counts, e);
        if (rc) return rc;
        vd_exec_eval_probs(j->ex, b->probs);
    }
    const int32_t *labels = vd_exec_input_labels(j->ex);
    int K = j->net.classes;
    for (int i = 0; i < n; i++) {
        vd_predict_result r = { .index = first + i, .rc = b->err[i].code, .k = j->k,
                                .label = j->ds && !b->err[i].code ? labels[i] : -1 };
        if (!j->ds) r.image = j->o->images[first + i];
        if (r.rc) {
            r.error = b->err[i].msg;
            j->n_failed++;
            if (!j->first_rc) j->first_rc = r.rc;
        } else {
            r.probs = b->probs + (size_t)i * (size_t)K;
            vd_predict_topk(r.probs, K, j->k, b->top);
            r.top = b->top;
            j->n_done++;
            if (j->ds) {
                j->hits1 += b->top[0] == r.label;
                for (int q = 0; q < j->k; q++) j->hits_k += b->top[q] == r.label;
            }
        }
        if (j->hooks && j->hooks->result) j->hooks->result(&r, j->hooks->ctx);
    }
    return VD_OK;
}

/* Image files: decoded and transformed one by one (vd_data_image_eval). */
static int run_images(vd_predict_job *j, batch_buf *b, vd_err *e) {
    int B = j->run.batch;
    int32_t *labels = vd_exec_input_labels(j->ex);
    memset(labels, 0, sizeof(int32_t) * (size_t)B);   /* none known (any class does) */
    for (int64_t first = 0; first < j->n_images; first += B) {
        int rc = stop_check(j, "while classifying", e);
        if (rc) return rc;
        int n = j->n_images - first < B ? (int)(j->n_images - first) : B;
        for (int i = 0; i < n; i++) {
            b->err[i] = (vd_err){ 0 };
            rc = vd_data_image_eval(&j->net, j->o->images[first + i],
                                    b->x + (size_t)i * (size_t)b->sample, &b->err[i]);
            if (rc == VD_ENOMEM) { *e = b->err[i]; return rc; }
        }
        fill_input(j, b, n);
        if ((rc = run_batch(j, b, first, n, e))) return rc;
    }
    return VD_OK;
}

/* The held-out split: the loader's batches in order (the last one wraps to
 * the first images: padding). A batch the loader cannot make (an image
 * that does not decode) is read again sample by sample, so that only the
 * bad images fail; the loader starts again after it. */
static int run_data(vd_predict_job *j, batch_buf *b, vd_err *e) {
    int B = j->run.batch;
    vd_loader_cfg lc = { .split = VD_SPLIT_TEST, .batch = B, .shuffle = false,
                         .seed = j->net.train.seed, .threads = j->o->loader_threads };
    vd_loader *ld = NULL;
    int rc = VD_OK;
    int32_t *labels = vd_exec_input_labels(j->ex);
    for (int64_t first = 0; first < j->n_images && !rc; first += B) {
        if ((rc = stop_check(j, "while classifying", e))) break;
        int n = j->n_images - first < B ? (int)(j->n_images - first) : B;
        lc.start = (uint64_t)first;
        if (!ld && (rc = vd_loader_create(&ld, j->ds, &lc, e))) break;
        vd_err le = {0};
        int lrc = vd_loader_next_as(ld, vd_exec_input_x(j->ex), vd_exec_input_dtype(j->ex),
                                    vd_exec_input_nhwc(j->ex), labels, &le);
        for (int i = 0; i < B; i++) b->err[i] = (vd_err){ 0 };
        if (lrc == VD_EDATA || lrc == VD_EIO) {
            vd_loader_destroy(&ld);   /* its failed batch is never consumed */
            for (int i = 0; i < n; i++)
                if (vd_data_sample(j->ds, VD_SPLIT_TEST, first + i, 0,
                                   b->x + (size_t)i * (size_t)b->sample, &labels[i], &b->err[i]))
                    labels[i] = 0;   /* (unknown; any class does for the padding) */
            fill_input(j, b, n);
        } else if (lrc) {
            *e = le;
            rc = lrc;
            break;
        }
        rc = run_batch(j, b, first, n, e);
    }
    vd_loader_destroy(&ld);
    return rc;
}

int vd_predict_job_run(vd_predict_job *j, vd_err *e) {
    int B = j->run.batch;
    batch_buf b = { .sample = vd_net_out_numel(&j->net, -1) };
    b.x = vd_malloc(sizeof(float) * (size_t)B * (size_t)b.sample, e);
    b.err = vd_calloc((size_t)B, sizeof *b.err, e);
    b.probs = vd_malloc(sizeof(float) * (size_t)B * (size_t)j->net.classes, e);
    b.top = vd_malloc(sizeof(int) * (size_t)j->k, e);
    int rc = b.x && b.err && b.probs && b.top ? VD_OK : VD_ENOMEM;
    if (!rc) rc = j->ds ? run_data(j, &b, e) : run_images(j, &b, e);
    vd_free(b.x);
    vd_free(b.err);
    vd_free(b.probs);
    vd_free(b.top);
    return rc;
}

void vd_predict_job_close(vd_predict_job *j) {
    vd_exec_destroy(&j->ex);
    if (j->have_plan) vd_plan_free(&j->plan);
    if (j->have_ses) vd_session_close(&j->ses);
    vd_data_close(&j->ds);
    vd_ckpt_classes_free(&j->ckpt_names);
    for (int i = 0; i < j->n_label_names; i++) vd_free(j->label_names[i]);
    vd_free(j->label_names);
    j->label_names = NULL;
    vd_config_run_free(&j->run);
    vd_net_free(&j->net);
}
