/* metrics.c — see metrics.h. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include "train/metrics.h"
#include "util/json.h"

struct vd_metrics {
    int fd;                     /* the file, open for writing */
    uint64_t size;              /* bytes of whole records written */
    char *path;                 /* as given, for messages */
    double t0;                  /* vd_now() at open */
    bool failed;                /* a write failed: no more lines */
};

int vd_metrics_open(vd_metrics **pm, const char *path, vd_err *e) {
    *pm = NULL;
    char *target;
    int rc = vd_output_path(path, &target, e);
    if (rc) return rc;
    vd_metrics *m = vd_calloc(1, sizeof *m, e);
    if (m) m->path = vd_strdup(path, e);
    if (!m || !m->path) {
        if (m) vd_free(m);
        vd_free(target);
        return VD_ENOMEM;
    }
    /* a new file of ours, renamed over path at once: what was there is
     * replaced, never written through, and the records go to it as they come */
    char *tmp = NULL;
    m->fd = vd_tmp_create(target, &tmp, e);
    if (m->fd >= 0 && rename(tmp, target) != 0) {
        rc = vd_errf(e, VD_EIO, "%s: cannot create: %s", path, strerror(errno));
        unlink(tmp);
        close(m->fd);
    }
    vd_free(tmp);
    vd_free(target);
    if (m->fd < 0 && !rc) rc = -m->fd;
    if (rc) {
        vd_free(m->path);
        vd_free(m);
        return rc;
    }
    m->t0 = vd_now();
    *pm = m;
    return VD_OK;
}

/* The record of ev (PROGRESS or EVAL), or NULL when out of memory. */
static json_t *metrics_record(const vd_metrics *m, const vd_train_event *ev) {
    json_t *o = json_object();
    bool ok = o != NULL;
    bool prog = ev->kind == VD_TEV_PROGRESS;
    vd_json_set(o, "event", vd_json_text(prog ? "progress" : "eval"), &ok);
    vd_json_set(o, "iteration", json_integer(ev->iter), &ok);
    vd_json_set(o, "total", json_integer(ev->total), &ok);
    if (prog) {
        vd_json_set(o, "epoch", json_integer(ev->epoch), &ok);
        vd_json_set(o, "loss", vd_json_real((double)ev->loss), &ok);
        vd_json_set(o, "avg_loss", vd_json_real(ev->avg_loss), &ok);
        vd_json_set(o, "train_accuracy", vd_json_real(ev->train_acc), &ok);
        vd_json_set(o, "lr", vd_json_real(ev->lr), &ok);
        vd_json_set(o, "images_per_s", vd_json_real(ev->img_per_s), &ok);
        /* per iteration since the last record: compute (the training step)
         * and the time the loop waited for data (datapath: vd_train_timing) */
        vd_json_set(o, "step_s", vd_json_real(ev->win.step_per_iter_s), &ok);
        vd_json_set(o, "data_wait_s", vd_json_real(ev->win.wait_per_iter_s), &ok);
        if (ev->loss_scaled) {   /* math fp16 */
            vd_json_set(o, "loss_scale", vd_json_real(ev->loss_scale), &ok);
            vd_json_set(o, "skipped_steps", json_integer(ev->skipped), &ok);
        }
    } else {
        vd_json_set(o, "accuracy", vd_json_real(ev->eval_acc), &ok);
        vd_json_set(o, "top5_accuracy", vd_json_real(ev->eval_acc5), &ok);
        vd_json_set(o, "eval_loss", vd_json_real(ev->eval_loss), &ok);
        vd_json_set(o, "images", json_integer(ev->eval_n), &ok);
        vd_json_set(o, "final", json_boolean(ev->final), &ok);
    }
    vd_json_set(o, "elapsed_s", vd_json_real(vd_now() - m->t0), &ok);
    if (!ok) { json_decref(o); return NULL; }
    return o;
}

int vd_metrics_event(vd_metrics *m, const vd_train_event *ev, vd_err *e) {
    if (!m || (ev->kind != VD_TEV_PROGRESS && ev->kind != VD_TEV_EVAL)) return VD_OK;
    if (m->failed) return vd_errf(e, VD_EIO, "%s: an earlier write failed", m->path);
    json_t *o = metrics_record(m, ev);
    if (!o) return vd_errf(e, VD_ENOMEM, "out of memory writing a --metrics record");
    /* one line: compact, reals to 17 digits (they read back exactly) */
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(o);
    if (!line) return vd_errf(e, VD_ENOMEM, "out of memory writing a --metrics record");
    size_t len = strlen(line);
    line[len] = '\n';              /* over the NUL: the record and its newline, one write */
    int rc = vd_write_all(m->fd, line, len + 1, m->path, e);
    json_free_t jfree;          /* jansson's block: its own free (util/json.c counts it) */
    json_get_alloc_funcs(NULL, &jfree);
    jfree(line);
    if (rc) {
        /* a full disk: whole records or none, so cut the partial one off */
        m->failed = true;
        if (ftruncate(m->fd, (off_t)m->size) == 0) (void)lseek(m->fd, (off_t)m->size, SEEK_SET);
        return rc;
    }
    m->size += len + 1;
    return VD_OK;
}

int vd_metrics_close(vd_metrics **pm, vd_err *e) {
    vd_metrics *m = pm ? *pm : NULL;
    if (!m) return VD_OK;
    int rc = VD_OK;
    if (close(m->fd) != 0 && !m->failed)
        rc = vd_errf(e, VD_EIO, "%s: close failed: %s", m->path, strerror(errno));
    vd_free(m->path);
    vd_free(m);
    *pm = NULL;
    return rc;
}
