/* train.c — the training loop; see train.h. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "train/train.h"
#include "train/ckpt.h"
#include "train/lr.h"

static void emit(const vd_train_opts *o, const vd_train_event *ev) {
    if (o->cb) o->cb(ev, o->user);
}

static void note(const vd_train_opts *o, int64_t iter, int64_t total, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(const vd_train_opts *o, int64_t iter, int64_t total, const char *fmt, ...) {
    if (!o->cb) return;
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vd_train_event ev = { .kind = VD_TEV_NOTE, .iter = iter, .total = total, .msg = msg };
    o->cb(&ev, o->user);
}

/* Synthetic data is generated on the device when the executor can
 * (vd_exec_can_synth): the loader only describes the batches. */
static bool synth_on_device(vd_exec *ex, const vd_dataset *ds) {
    return vd_data_is_synthetic(ds) && vd_exec_can_synth(ex);
}

/* The next global batch into ex's input buffers (next: the look-ahead
 * ones): the loader hands out shards of batch / ranks samples, rank r's is
 * the r-th of each global batch (one executor: the whole batch), each
 * copied from the loader's ring or, from a synth_device loader, described
 * (the device makes x). */
static int fetch(vd_loader *ld, vd_exec *ex, bool next, vd_err *e) {
    int rc = VD_OK;
    for (int r = 0; r < vd_exec_ranks(ex) && !rc; r++) {
        int32_t *labels = next ? vd_exec_rank_next_labels(ex, r) : vd_exec_rank_input_labels(ex, r);
        if (vd_loader_threads(ld) == 0)
            rc = vd_loader_next_synth(ld, next ? vd_exec_rank_next_synth(ex, r)
                                               : vd_exec_rank_input_synth(ex, r), labels, e);
        else
            rc = vd_loader_next_as(ld, next ? vd_exec_rank_next_x(ex, r)
                                            : vd_exec_rank_input_x(ex, r),
                                   vd_exec_input_dtype(ex), vd_exec_input_nhwc(ex), labels, e);
    }
    return rc;
}

/* The look-ahead batch fetched on its own thread while the step runs (input
 * staging): the executor's stage hook (ahead_wait) waits for it just before
 * it uploads the batch, so the copy out of the loader's ring (150 MB for a
 * b256 ImageNet batch in fp32) overlaps the forward pass instead of holding
 * the GPU at the start of every step. ahead_wait may be called from several
 * rank threads, and again by the loop after the step: the first call joins,
 * the others return the stored result.
 *
 * What counts as waiting for data: the host reaches the hook with much of
 * the step still queued on the device, so the time it spends blocked there
 * is mostly the device's work, not a wait. When the batch is not ready yet,
 * the hook first waits for the device to run what is queued
 * (vd_exec_rank_drain: the host would be blocked anyway) and counts only the
 * time blocked after that, when the device is idle: the device's data wait.
 * (With ranks, the rank thread that gets there first drains its own
 * device.) */
typedef struct ahead {
    pthread_t th;
    pthread_mutex_t mu;
    bool running;               /* a thread to join */
    vd_loader *ld;
    vd_exec *ex;
    int rc;
    vd_err err;
    double wait_s;              /* time the device sat idle waiting for it */
    atomic_bool done;           /* the thread has fetched the batch */
} ahead;

static void *ahead_main(void *p) {
    ahead *a = p;
    a->rc = fetch(a->ld, a->ex, true, &a->err);
    atomic_store(&a->done, true);
    return NULL;
}

/* ex, rank: the executor and the rank whose thread calls (the stage hook), or
 * NULL (the loop, after the step: nothing queued to overlap) */
static int ahead_wait(void *ctx, vd_exec *ex, int rank) {
    ahead *a = ctx;
    pthread_mutex_lock(&a->mu);
    if (a->running) {
        vd_err de = {0};
        int drc = ex && !atomic_load(&a->done) ? vd_exec_rank_drain(ex, rank, &de) : VD_OK;
        double t = vd_now();
        pthread_join(a->th, NULL);
        a->wait_s += vd_now() - t;
        a->running = false;
        /* a device error: reported after the step, as a failed fetch */
        if (drc && !a->rc) { a->rc = drc; a->err = de; }
    }
    int rc = a->rc;
    pthread_mutex_unlock(&a->mu);
    return rc;
}

/* Start fetching the look-ahead batch; where no thread can be started, fetch
 * it here. */
static void ahead_start(ahead *a, vd_loader *ld, vd_exec *ex) {
    a->ld = ld;
    a->ex = ex;
    a->rc = VD_OK;
    memset(&a->err, 0, sizeof a->err);
    atomic_store(&a->done, false);
    a->running = pthread_create(&a->th, NULL, ahead_main, a) == 0;
    if (!a->running) ahead_main(a);
}

int vd_train_evaluate(const vd_net *net, vd_exec *ex, vd_dataset *ds, int threads,
                      const volatile sig_atomic_t *stop, vd_eval_result *res, vd_err *e) {
    memset(res, 0, sizeof *res);
    const vd_data_info *info = vd_data_get_info(ds);
    int batch = net->train.batch;
    int64_t n = info->n[VD_SPLIT_TEST], nb = (n + batch - 1) / batch;
    if (nb == 0) return VD_OK;
    vd_loader *ld;
    int proc, procs = vd_exec_procs(ex, &proc);   /* --mpi: this process's shards */
    vd_loader_cfg cfg = { .split = VD_SPLIT_TEST, .batch = batch / (vd_exec_ranks(ex) * procs),
                          .shuffle = false, .seed = net->train.seed, .start = 0,
                          .threads = threads, .synth_device = synth_on_device(ex, ds),
                          .rank = proc, .ranks = procs, .pad = true };
    int rc = vd_loader_create(&ld, ds, &cfg, e);
    if (rc) return rc;
    int64_t top1 = 0, top5 = 0, scored = 0;
    double lsum = 0;
    for (int64_t b = 0; b < nb && !rc; b++) {
        if (stop && *stop) {
            rc = vd_errf(e, VD_ESTOP, "evaluation stopped after %lld of %lld batches",
                         (long long)b, (long long)nb);
            break;
        }
        rc = fetch(ld, ex, false, e);
        vd_eval_counts c;
        if (!rc) rc = vd_exec_eval_step(ex, &c, e);
        if (rc) break;
        top1 += c.top1;
        top5 += c.top5;
        scored += c.scored;
        lsum += (double)c.loss * c.scored;
    }
    vd_loader_destroy(&ld);
    if (rc) return rc;
    if (scored != n)
        return vd_errf(e, VD_EINTERNAL, "the evaluation scored %lld of the %lld held-out images",
                       (long long)scored, (long long)n);
    res->n = n;
    res->acc = (double)top1 / (double)n;
    res->acc5 = (double)top5 / (double)n;
    res->loss = lsum / (double)n;
    return VD_OK;
}

/* Fill t from the raw sums (see vd_train_timing). */
static void set_timing(vd_train_timing *t, int64_t iters, int batch, double wall_s,
                       double wait_s, double step_s) {
    t->iters = iters;
    t->images = iters * batch;
    t->wall_s = wall_s > 0 ? wall_s : 0;
    t->wait_s = wait_s;
    t->step_s = step_s;
    t->img_per_s = iters > 0 && wall_s > 0 ? (double)t->images / wall_s : 0;
    t->wait_per_iter_s = iters > 0 ? wait_s / (double)iters : 0;
    t->step_per_iter_s = iters > 0 ? step_s / (double)iters : 0;
}

/* A periodic checkpoint / evaluation follows training iteration n (counted
 * from 1; the run's last iteration has its own, at the end). */
static bool save_due(const vd_train_opts *o, int64_t n) {
    return o->save_path && o->save_every > 0 && n % o->save_every == 0;
}
static bool eval_due(const vd_train_opts *o, int64_t n) {
    return o->eval_every > 0 && n % o->eval_every == 0;
}

/* A numbered checkpoint this run wrote (--keep): the model file it wrote
 * (a link at the numbered name followed) and that file's identity, so that
 * rotating it away never removes what replaced it since. */
typedef struct kept_ckpt {
    char *path;
    dev_t dev;
    ino_t ino;
} kept_ckpt;

typedef struct run {
    const vd_net *net;
    vd_exec *ex;
    vd_dataset *ds;
    const vd_train_opts *o;
    float *params, *state;      /* host copies: [param_floats], the optimizer's state
                                   [vd_net_state_floats]; NULL until needed (host_state) */
    vd_loader *ld;
    vd_train_best best;         /* save_best / early_stop: the best evaluation so far */
    char *best_path;            /* save_best: vd_ckpt_tagged(save_path, "best") */
    kept_ckpt *kept;            /* keep: this run's numbered checkpoints, oldest first */
    int64_t n_kept, cap_kept;   /* [n_kept] of [cap_kept]; n_kept at most keep */
} run;

/* The host copies of the parameters and the optimizer's state, allocated
 * on first use: a checkpoint to load or save. A run that starts from
 * vd_net_init_params and saves nothing never needs them (AlexNet with SGD:
 * 488 MB). */
static int host_state(run *r, vd_err *e) {
    size_t n = (size_t)(r->net->param_floats ? r->net->param_floats : 1);
    size_t ns = (size_t)(r->net->param_floats ? vd_net_state_floats(r->net) : 1);
    if (!r->params && !(r->params = vd_malloc(sizeof(float) * n, e))) return VD_ENOMEM;
    if (!r->state && !(r->state = vd_calloc(ns, sizeof(float), e))) return VD_ENOMEM;
    return VD_OK;
}

/* Does the run track its best evaluation (vd_train_opts.save_best, early_stop)? */
static bool tracks(const vd_train_opts *o) { return o->save_best || o->early_stop > 0; }

/* The checkpoint pair at path. samples: the data position to record (the
 * loader's position: every batch it handed out was trained on, see
 * train_loop). */
static int save_to(run *r, const char *path, int64_t iter, uint64_t samples, bool final,
                   vd_err *e) {
    int proc;
    vd_exec_procs(r->ex, &proc);
    if (proc != 0) return VD_OK;    /* --mpi: process 0 writes the checkpoints */
    int64_t steps = 0;
    int rc = host_state(r, e);
    if (!rc) rc = vd_exec_get_state(r->ex, r->params, r->state, &steps, e);
    if (rc) return rc;
    vd_train_state st = { .iteration = iter, .sgd_steps = steps,
                          .samples = samples, .seed = r->net->train.seed,
                          .batch = r->net->train.batch };
    st.has_loss_scale = vd_exec_loss_scale(r->ex, &st.loss_scale);   /* math fp16 */
    if (tracks(r->o)) st.best = r->best;
    if (r->o->data_spec)   /* it fits (checked as the run started) */
        snprintf(st.data, sizeof st.data, "%s", r->o->data_spec);
    st.val_split = r->o->val_split;
    const vd_data_info *di = vd_data_get_info(r->ds);   /* its class names, if any */
    vd_ckpt_save_opts so = { .dtype = r->o->save_dtype, .classes = di->class_names,
                             .n_classes = di->classes };
    rc = vd_ckpt_save_ex(path, r->net, r->params, r->state, &st, &so, e);
    if (rc) {
        vd_err_prefix(e, "saving the checkpoint %s at iteration %lld", path, (long long)iter);
        return rc;
    }
    vd_train_event ev = { .kind = VD_TEV_SAVE, .iter = iter, .total = r->o->iters,
                          .final = final, .path = path };
    emit(r->o, &ev);
    return VD_OK;
}

static int save_at(run *r, int64_t iter, uint64_t samples, bool final, vd_err *e) {
    return save_to(r, r->o->save_path, iter, samples, final, e);
}

static int save(run *r, int64_t iter, bool final, vd_err *e) {
    return save_at(r, iter, vd_loader_position(r->ld), final, e);
}

/* --keep: remove the oldest numbered checkpoint of this run (its model file,
 * and the .state and .state.prev beside it), unless the model file is no
 * longer the one this run wrote (then all three stay, with a note). */
static void rotate(run *r, int64_t iter) {
    kept_ckpt *k = &r->kept[0];
    struct stat st;
    if (lstat(k->path, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == k->dev &&
        st.st_ino == k->ino) {
        char *sp = vd_strfmt(NULL, "%s.state", k->path);
        char *pp = vd_strfmt(NULL, "%s.state.prev", k->path);
        unlink(k->path);
        if (sp) unlink(sp);
        if (pp) unlink(pp);
        vd_free(sp);
        vd_free(pp);
        note(r->o, iter, r->o->iters, "removed %s (+ .state): --keep %lld keeps the newest",
             k->path, (long long)r->o->keep);
    } else {
        note(r->o, iter, r->o->iters, "kept %s: it changed since this run wrote it, so --keep "
             "leaves it alone", k->path);
    }
    vd_free(k->path);
    memmove(r->kept, r->kept + 1, sizeof *r->kept * (size_t)(r->n_kept - 1));
    r->n_kept--;
}

/* A periodic save after iteration iter: save_path, or with keep a numbered
 * checkpoint, the oldest of this run's removed once there are more than
 * keep (after the new one is complete: never fewer than keep on disk). */
static int save_periodic(run *r, int64_t iter, vd_err *e) {
    const vd_train_opts *o = r->o;
    if (o->keep <= 0) return save(r, iter, false, e);
    int proc;
    vd_exec_procs(r->ex, &proc);
    if (proc != 0) return VD_OK;    /* --mpi: process 0 writes the checkpoints */
    char tag[24], *path = NULL, *written = NULL;
    snprintf(tag, sizeof tag, "%lld", (long long)iter);
    if (!(path = vd_ckpt_tagged(o->save_path, tag, e))) return VD_ENOMEM;
    int rc = save_to(r, path, iter, vd_loader_position(r->ld), false, e);
    struct stat st;
    /* where the save wrote (a link at the name is written through) */
    if (!rc) rc = vd_output_path(path, &written, e);
    if (!rc && stat(written, &st) != 0)
        rc = vd_errf(e, VD_EIO, "%s: just written, but: %s", written, strerror(errno));
    vd_free(path);
    if (!rc && r->n_kept == r->cap_kept && r->n_kept < o->keep) {   /* grows to keep + 1 */
        int64_t cap = r->cap_kept ? 2 * r->cap_kept : 8;
        kept_ckpt *k = vd_realloc(r->kept, sizeof *k * (size_t)cap, e);
        if (!k) rc = VD_ENOMEM;
        else { r->kept = k; r->cap_kept = cap; }
    }
    if (rc) { vd_free(written); return rc; }
    if (r->n_kept == o->keep) rotate(r, iter);
    r->kept[r->n_kept++] = (kept_ckpt){ .path = written, .dev = st.st_dev, .ino = st.st_ino };
    return VD_OK;
}

/* A data error (an undecodable image, a read error) ended the run after
 * iteration iter: the parameters still hold iteration iter's result, so
 * write them as the checkpoint (--save) before returning the error, and the
 * run can be resumed once the data is fixed. The loader may have consumed
 * batches past the last trained one (staging, the failed fetch), so the
 * position is counted from the iterations: samples0 + trained * batch.
 * Nothing is written when no iteration ran in this process (a checkpoint
 * would repeat the starting point; a resumed FILE must not be replaced by
 * the same state). The failure e is kept as it is; a failing rescue save
 * is added to it. Only for data errors (rc_data VD_EDATA or VD_EIO). */
static void save_after_error(run *r, int rc_data, int64_t iter, int64_t first,
                             uint64_t samples0, vd_err *e) {
    if (!r->o->save_path || iter <= first || (rc_data != VD_EDATA && rc_data != VD_EIO)) return;
    vd_err se = {0};
    uint64_t samples = samples0 + (uint64_t)(iter - first) * (uint64_t)r->net->train.batch;
    int rc = save_at(r, iter, samples, true, &se);
    if (rc) {
        size_t n = strlen(e->msg);
        snprintf(e->msg + n, sizeof e->msg - n, " (and the checkpoint could not be saved: %s)",
                 se.msg);
    } else {
        note(r->o, iter, r->o->iters, "saved the last good checkpoint %s at iteration %lld "
             "before stopping on the data error below", r->o->save_path, (long long)iter);
    }
}

/* *ran (may be NULL): whether an evaluation ran (the held-out split holds a
 * batch at least); its results are then in res. */
static int eval(run *r, int64_t iter, bool final, vd_train_result *res, bool *ran, vd_err *e) {
    vd_eval_result ev_r;
    if (ran) *ran = false;
    int rc = vd_train_evaluate(r->net, r->ex, r->ds, r->o->loader_threads, r->o->stop, &ev_r, e);
    if (rc) return rc;
    if (ev_r.n == 0) {
        if (final)
            note(r->o, iter, r->o->iters, "no evaluation: %s has no held-out images (a "
                 "folder:DIR without val/ gets some with --val-split F)",
                 vd_data_get_info(r->ds)->desc);
        return VD_OK;
    }
    res->eval_acc = ev_r.acc;
    res->eval_acc5 = ev_r.acc5;
    res->eval_loss = ev_r.loss;
    res->eval_n = ev_r.n;
    if (ran) *ran = true;
    vd_train_event ev = { .kind = VD_TEV_EVAL, .iter = iter, .total = r->o->iters,
                          .eval_acc = ev_r.acc, .eval_acc5 = ev_r.acc5, .eval_loss = ev_r.loss,
                          .eval_n = ev_r.n, .final = final };
    emit(r->o, &ev);
    return VD_OK;
}

/* An evaluation that counts (vd_train_opts.early_stop) ran after iteration
 * iter, its accuracy in res: an improvement is a top-1 accuracy above the
 * best so far (the first evaluation is one; an equal one is not), which
 * save_best writes to best_path; early_stop ends the run after that many
 * evaluations in a row without one (res->early_stopped, with a note). */
static int track(run *r, int64_t iter, vd_train_result *res, vd_err *e) {
    const vd_train_opts *o = r->o;
    if (!tracks(o)) return VD_OK;
    vd_train_best *b = &r->best;
    if (!b->known || res->eval_acc > b->acc) {
        *b = (vd_train_best){ .known = true, .acc = res->eval_acc, .iter = iter, .since = 0 };
        res->best = *b;
        return o->save_best ? save_to(r, r->best_path, iter, vd_loader_position(r->ld), false, e)
                            : VD_OK;
    }
    b->since++;
    res->best = *b;
    if (o->early_stop > 0 && b->since >= o->early_stop && iter < o->iters) {
        res->early_stopped = true;
        note(o, iter, o->iters, "early stop at iteration %lld of %lld: %lld evaluations in a "
             "row without a higher test accuracy than %.2f%% (iteration %lld)", (long long)iter,
             (long long)o->iters, (long long)b->since, 100.0 * b->acc, (long long)b->iter);
    }
    return VD_OK;
}

/* The starting point: --resume's state, --init's weights, or fresh
 * parameters; *iter and *samples where the run continues from. */
static int start_point(run *r, int64_t *iter, uint64_t *samples, vd_err *e) {
    const vd_train_opts *o = r->o;
    const vd_net *net = r->net;
    const vd_train_cfg *cfg = &net->train;
    vd_exec *ex = r->ex;
    int rc;
    *iter = 0;
    *samples = 0;
    if (o->init_path) {
        char summary[1024];
        /* what --init-skip leaves gets the seed's initialisation, as without --init */
        if ((rc = vd_ckpt_init_model(o->init_path, net, r->params, o->init_skip, cfg->seed,
                                     summary, sizeof summary, e)) ||
            (rc = vd_exec_set_state(ex, r->params, NULL, 0, e)))
            return rc;
        note(o, 0, o->iters, "%s", summary);
        return VD_OK;
    }
    if (!o->resume_path) return vd_exec_init_params(ex, cfg->seed, e);   /* in pieces */
    vd_train_state st;
    if ((rc = vd_ckpt_load(o->resume_path, net, r->params, r->state, &st, e))) return rc;
    if (st.seed != cfg->seed)
        return vd_errf(e, VD_EUSAGE, "%s was trained with seed %llu but this run has seed "
                       "%llu; resume with the checkpoint's seed", o->resume_path,
                       (unsigned long long)st.seed, (unsigned long long)cfg->seed);
    if (st.batch != cfg->batch)
        note(o, st.iteration, o->iters, "resuming at batch %d although %s was trained at "
             "batch %d: the run will not repeat an uninterrupted one exactly", cfg->batch,
             o->resume_path, st.batch);
    if ((rc = vd_exec_set_state(ex, r->params, r->state, st.sgd_steps, e))) return rc;
    bool scaled = vd_exec_loss_scale(ex, NULL);   /* math fp16 */
    if (scaled && st.has_loss_scale && (rc = vd_exec_set_loss_scale(ex, &st.loss_scale, e)))
        return rc;
    if (scaled && !st.has_loss_scale)
        note(o, st.iteration, o->iters, "%s has no loss scale (saved by a run in another "
             "math): math fp16 starts at the initial scale %g", o->resume_path,
             (double)VD_LOSS_SCALE_INIT);
    if (!scaled && st.has_loss_scale)
        note(o, st.iteration, o->iters, "%s was saved in math fp16: its loss scale (%g) is "
             "dropped in math %s", o->resume_path, (double)st.loss_scale.scale,
             vd_math_name(cfg->math));
    *iter = st.iteration;
    *samples = st.samples;
    if (tracks(o)) r->best = st.best;   /* the earlier run's best goes on counting */
    if (st.from_prev)
        note(o, *iter, o->iters, "%s.state does not belong to %s (a save was interrupted); "
             "resuming from the previous state %s.state.prev, which does", o->resume_path,
             o->resume_path, o->resume_path);
    note(o, *iter, o->iters, "resumed from %s at iteration %lld", o->resume_path,
         (long long)*iter);
    if (strcmp(st.model_dtype, "F32") != 0)
        note(o, *iter, o->iters, "%s holds %s weights (saved with --save-dtype): the run "
             "continues from the rounded weights and the F32 optimizer state, so it does not "
             "repeat an uninterrupted run exactly", o->resume_path, st.model_dtype);
    return VD_OK;
}

/* Where the loop's time goes (vd_train_timing): waiting for the loader, in
 * the steps, and in saves / evaluations (not counted as training time);
 * run totals and the progress window's. */
typedef struct loop_clock {
    double t_run0, t_win0, step_sum, win_loss;
    int64_t n_steps_timed, win_n, win_correct;
    double step_sum_all;      /* (the same with the steps that captured a graph, for a
                                 run that timed no other: mean_iter_s) */
    int64_t n_steps_all;
    double run_wait, run_step, run_excl, win_wait, win_step, win_excl;
} loop_clock;

/* The epoch (from 1) that the samples ending at data position s (> 0)
 * end in, with n samples an epoch. */
static int64_t epoch_of(uint64_t s, int64_t n) { return (int64_t)((s - 1) / (uint64_t)n) + 1; }

/* The progress event after iteration iter (of the window since the last);
 * the run's data position was samples0 at iteration first. */
static void progress(run *r, loop_clock *c, int64_t iter, int64_t first, uint64_t samples0,
                     int64_t end, float loss, double lr, bool last) {
    const vd_train_opts *o = r->o;
    int batch = r->net->train.batch;
    int64_t n_train = vd_data_get_info(r->ds)->n[VD_SPLIT_TRAIN];
    double now = vd_now(), span = now - c->t_win0 - c->win_excl;
    double per_iter = span / (double)c->win_n;
    vd_train_event ev = { .kind = VD_TEV_PROGRESS, .iter = iter, .total = o->iters,
                          .loss = loss, .avg_loss = c->win_loss / (double)c->win_n, .lr = lr,
                          .train_acc = (double)c->win_correct / ((double)c->win_n * batch),
                          .epoch = epoch_of(samples0 + (uint64_t)(iter - first) * (uint64_t)batch,
                                            n_train),
                          .epochs = epoch_of(samples0 + (uint64_t)(o->iters - first) *
                                             (uint64_t)batch, n_train),
                          .eta_s = per_iter * (double)(end - iter), .final = last };
    set_timing(&ev.win, c->win_n, r->net->train.batch, span, c->win_wait, c->win_step);
    ev.img_per_s = ev.win.img_per_s;
    vd_loss_scale ls;   /* as read back with the loss (no extra sync) */
    if ((ev.loss_scaled = vd_exec_loss_scale(r->ex, &ls))) {
        ev.loss_scale = ls.scale;
        ev.skipped = ls.skipped;
    }
    emit(o, &ev);
    c->t_win0 = now;
    c->win_loss = 0;
    c->win_n = c->win_correct = 0;
    c->win_wait = c->win_step = c->win_excl = 0;
}

/* The error of a training step that failed (rc), or VD_OK. */
static int step_error(const vd_exec *ex, int rc, float loss, double lr, int64_t iter, vd_err *e) {
    if (rc == VD_ENUMERIC && vd_exec_loss_scale(ex, NULL) && isfinite(loss)) {
        /* math fp16's loss scale gave up (the message says why); the last
         * checkpoint saved stays the last good one */
        vd_err_prefix(e, "iteration %lld", (long long)iter + 1);
        return rc;
    }
    if (rc == VD_ENUMERIC || (!rc && !isfinite(loss)))
        /* iterations counted from 1, as the progress lines count them */
        return vd_errf(e, VD_ENUMERIC, "the loss became %s at iteration %lld (lr %g); the run "
                       "diverged: lower --lr, or check the data and the net",
                       isnan(loss) ? "NaN" : "infinite", (long long)iter + 1, lr);
    if (rc) vd_err_prefix(e, "iteration %lld", (long long)iter + 1);
    return rc;
}

/* Iterations *iter .. end-1, with the saves and evaluations due between
 * them; *iter advances with each. Input staging (the plan stages): the
 * batch of the next iteration is fetched before this one runs and uploaded
 * during it, but only when the next thing is another training iteration:
 * not after the last, not before a save or an evaluation, not once a stop
 * is requested. So the loader's position at a save counts exactly the
 * batches trained on; a stop that arrives after the next batch was staged
 * takes effect one iteration later (that batch is trained first). */
static int train_loop(run *r, ahead *ah, int64_t *iter, int64_t end, uint64_t samples,
                      loop_clock *c, vd_train_result *res, vd_err *e) {
    const vd_train_opts *o = r->o;
    const vd_train_cfg *cfg = &r->net->train;
    vd_exec *ex = r->ex;
    int64_t first = *iter;
    float loss = 0;
    int rc;
    bool stage = vd_exec_stages(ex);
    if (stage) vd_exec_set_stage_hook(ex, ahead_wait, ah);
    bool staged = false;        /* the input buffers hold iteration iter's batch */
    while (*iter < end) {
        if (!staged) {
            if (o->stop && *o->stop) { res->interrupted = true; break; }
            double tw = vd_now();
            rc = fetch(r->ld, ex, false, e);
            tw = vd_now() - tw;
            c->run_wait += tw;
            c->win_wait += tw;
            if (rc) { save_after_error(r, rc, *iter, first, samples, e); return rc; }
        }
        int64_t nx = *iter + 1;
        bool stage_next = stage && nx < end && !(o->stop && *o->stop) && !save_due(o, nx) &&
                          !eval_due(o, nx);
        if (stage_next) {   /* fetched while the step runs (struct ahead) */
            vd_exec_next_ready(ex);
            ahead_start(ah, r->ld, ex);
        }
        staged = stage_next;
        double lr = vd_lr_at(&cfg->lr_policy, cfg->lr, *iter, o->iters);
        vd_exec_stats st;
        vd_exec_get_stats(ex, &st);
        int64_t captures = st.graph_captures;
        double t0 = vd_now();
        rc = vd_exec_train_step(ex, (float)lr, *iter, &loss, e);
        double dt = vd_now() - t0;
        vd_exec_get_stats(ex, &st);
        bool captured = st.graph_captures > captures;
        if (stage_next) {   /* joined by the stage hook, or now */
            ahead_wait(ah, NULL, 0);
            dt -= ah->wait_s;
            c->run_wait += ah->wait_s;
            c->win_wait += ah->wait_s;
            ah->wait_s = 0;
        }
        c->run_step += dt;
        c->win_step += dt;
        if ((rc = step_error(ex, rc, loss, lr, *iter, e))) return rc;
        ++*iter;
        res->iters_done = *iter;
        res->last_loss = loss;
        if (*iter - first > 1 || end - first == 1) {
            c->step_sum_all += dt;
            c->n_steps_all++;
            if (!captured) { c->step_sum += dt; c->n_steps_timed++; }
        }
        c->win_loss += loss;
        c->win_correct += vd_exec_train_correct(ex);
        c->win_n++;
        bool last = *iter == end;
        if ((*iter - first) % o->log_every == 0 || last)
            progress(r, c, *iter, first, samples, end, loss, lr, last);
        if (stage_next && ah->rc) {   /* the next batch failed: stop after this iteration */
            rc = ah->rc;
            *e = ah->err;
            save_after_error(r, rc, *iter, first, samples, e);
            return rc;
        }
        double tx = vd_now();
        /* the evaluation first, so that a checkpoint saved after the same
         * iteration records it (the best evaluation, for --resume) */
        if (eval_due(o, *iter) && !last) {
            bool ran;
            rc = eval(r, *iter, false, res, &ran, e);
            if (rc == VD_ESTOP) {   /* a stop during it: the run ends as at any stop */
                res->interrupted = true;
                break;
            }
            if (rc) {
                save_after_error(r, rc, *iter, first, samples, e);
                return rc;
            }
            if (ran && (rc = track(r, *iter, res, e))) return rc;
            if (res->early_stopped) break;   /* saved at the end, as a run's last iteration */
        }
        if (save_due(o, *iter) && !last && (rc = save_periodic(r, *iter, e))) return rc;
        tx = vd_now() - tx;
        c->run_excl += tx;
        c->win_excl += tx;
    }
    return VD_OK;
}

int vd_train_run(const vd_net *net, vd_exec *ex, vd_dataset *ds, const vd_train_opts *o,
                 vd_train_result *out, vd_err *e) {
    vd_train_result res_local, *res = out ? out : &res_local;
    memset(res, 0, sizeof *res);
    const vd_train_cfg *cfg = &net->train;
    if (o->iters < 0) return vd_errf(e, VD_EUSAGE, "the number of iterations must be >= 0");
    int64_t end = o->stop_at > 0 && o->stop_at < o->iters ? o->stop_at : o->iters;
    if (o->log_every < 1) return vd_errf(e, VD_EUSAGE, "--log-every must be >= 1");
    if (o->resume_path && o->init_path)
        return vd_errf(e, VD_EUSAGE, "--resume and --init exclude each other");
    if ((o->keep > 0 && (!o->save_path || o->save_every <= 0)) || (o->save_best && !o->save_path))
        return vd_errf(e, VD_EUSAGE, "--keep needs --save-every and --save, --save-best needs "
                       "--save");
    /* before training, not at its first save */
    if (o->save_path && o->data_spec && strlen(o->data_spec) >= sizeof ((vd_train_state *)0)->data)
        return vd_errf(e, VD_EUSAGE, "the data spec '%.64s...' is too long to record in a "
                       "checkpoint (at most %zu bytes)", o->data_spec,
                       sizeof ((vd_train_state *)0)->data - 1);
    int rc = vd_lr_validate(&cfg->lr_policy, cfg->lr, e);
    if (rc) return rc;

    run r = { .net = net, .ex = ex, .ds = ds, .o = o };
    ahead ah = {.running = false};
    pthread_mutex_init(&ah.mu, NULL);
    int64_t iter;
    uint64_t samples;
    if ((o->resume_path || o->init_path) && (rc = host_state(&r, e))) goto done;
    if ((rc = start_point(&r, &iter, &samples, e))) goto done;
    res->first_iter = iter;
    res->iters_done = iter;
    res->best = r.best;
    if (o->save_best && !(r.best_path = vd_ckpt_tagged(o->save_path, "best", e))) {
        rc = VD_ENOMEM;
        goto done;
    }
    if (o->early_stop > 0 && r.best.since >= o->early_stop && iter < end) {
        /* resumed from a run that stopped early: so would the run in one piece */
        res->early_stopped = true;
        note(o, iter, o->iters, "%s stopped early at iteration %lld: %lld evaluations in a row "
             "without a higher test accuracy than %.2f%% (iteration %lld); no training (a "
             "larger --early-stop goes on)", o->resume_path, (long long)iter,
             (long long)r.best.since, 100.0 * r.best.acc, (long long)r.best.iter);
        end = iter;
    }

    int proc, procs = vd_exec_procs(ex, &proc);   /* --mpi: this process's shards */
    vd_loader_cfg lc = { .split = VD_SPLIT_TRAIN, .batch = cfg->batch / (vd_exec_ranks(ex) * procs),
                         .shuffle = true, .seed = cfg->seed, .start = samples,
                         .threads = o->loader_threads, .synth_device = synth_on_device(ex, ds),
                         .rank = proc, .ranks = procs };
    rc = vd_loader_create(&r.ld, ds, &lc, e);
    if (rc) goto done;
    res->loader_threads = vd_loader_threads(r.ld);
    res->synth_device = lc.synth_device;

    if (res->early_stopped) {
        /* said above */
    } else if (iter >= end && o->iters > 0) {
        note(o, iter, o->iters, "the checkpoint is already at iteration %lld, not below the "
             "requested %lld: no training", (long long)iter, (long long)end);
    } else if (iter >= end) {
        note(o, iter, o->iters, "--iters 0: evaluation only");
    } else {
        vd_train_event ev = { .kind = VD_TEV_START, .iter = iter, .total = o->iters };
        emit(o, &ev);
    }

    int64_t first = iter;
    loop_clock c = { .t_run0 = vd_now() };
    c.t_win0 = c.t_run0;
    if ((rc = train_loop(&r, &ah, &iter, end, samples, &c, res, e))) goto done;
    res->train_s = vd_now() - c.t_run0;
    vd_loss_scale ls;
    if ((res->loss_scaled = vd_exec_loss_scale(ex, &ls))) {
        res->loss_scale = ls.scale;
        res->skipped = ls.skipped;
    }
    res->mean_iters = c.n_steps_timed ? c.n_steps_timed : c.n_steps_all;
    res->mean_iter_s = c.n_steps_timed ? c.step_sum / (double)c.n_steps_timed
                     : c.n_steps_all ? c.step_sum_all / (double)c.n_steps_all : 0;
    set_timing(&res->timing, iter - first, cfg->batch, res->train_s - c.run_excl, c.run_wait,
               c.run_step);
    if (res->interrupted)
        note(o, iter, o->iters, "stopped at iteration %lld of %lld", (long long)iter,
             (long long)o->iters);

    /* ---- the end ----
     * Save before the final evaluation: a failing evaluation (an undecodable
     * held-out image, ...) must not cost the run its checkpoint, nor must a
     * stop or a crash during a long one. Evaluation does not change the
     * parameters, so the saved bytes are the same.
     * A resumed run that trained nothing leaves its own checkpoint as it is,
     * but a --save elsewhere must still be written (it is what the caller
     * asked for, and the CLI reports it as saved). An early stop evaluated
     * this iteration already. */
    bool saves = o->save_path && (iter > first || !o->resume_path ||
                                  strcmp(o->save_path, o->resume_path) != 0);
    if (saves && (rc = save(&r, iter, true, e))) goto done;
    if (o->eval_at_end && !res->interrupted && !res->early_stopped) {
        bool ran;
        rc = eval(&r, iter, true, res, &ran, e);
        if (rc == VD_ESTOP) {   /* the checkpoint is saved already */
            res->interrupted = true;
            rc = VD_OK;
        } else if (!rc && ran && iter > first && (iter == o->iters || eval_due(o, iter))) {
            /* it counts (vd_train_opts.early_stop); at a periodic evaluation's
             * iteration the checkpoint records it, as the loop's do, so that
             * a resumed run counts on from it */
            rc = track(&r, iter, res, e);
            if (!rc && saves && tracks(o) && eval_due(o, iter)) rc = save(&r, iter, true, e);
        }
    }
done:
    ahead_wait(&ah, NULL, 0);              /* no thread outlives the loop */
    vd_exec_set_stage_hook(ex, NULL, NULL);
    pthread_mutex_destroy(&ah.mu);
    vd_loader_destroy(&r.ld);
    vd_free(r.params);
    vd_free(r.state);
    vd_free(r.best_path);
    for (int64_t k = 0; k < r.n_kept; k++) vd_free(r.kept[k].path);
    vd_free(r.kept);
    return rc;
}
