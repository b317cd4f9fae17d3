/* train.c — the training loop; see train.h. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
                                   vd_exec_input_dtype(ex), labels, e);
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
                      const volatile sig_atomic_t *stop, double *acc, double *loss, int64_t *n,
                      vd_err *e) {
    *acc = *loss = 0;
    *n = 0;
    const vd_data_info *info = vd_data_get_info(ds);
    int batch = net->train.batch;
    int64_t nb = info->n[VD_SPLIT_TEST] / batch;
    if (nb == 0) return VD_OK;
    vd_loader *ld;
    int proc, procs = vd_exec_procs(ex, &proc);   /* --mpi: this process's shards */
    vd_loader_cfg cfg = { .split = VD_SPLIT_TEST, .batch = batch / (vd_exec_ranks(ex) * procs),
                          .shuffle = false, .seed = net->train.seed, .start = 0,
                          .threads = threads, .synth_device = synth_on_device(ex, ds),
                          .rank = proc, .ranks = procs };
    int rc = vd_loader_create(&ld, ds, &cfg, e);
    if (rc) return rc;
    int64_t correct = 0;
    double lsum = 0;
    for (int64_t b = 0; b < nb && !rc; b++) {
        if (stop && *stop) {
            rc = vd_errf(e, VD_ESTOP, "evaluation stopped after %lld of %lld batches",
                         (long long)b, (long long)nb);
            break;
        }
        rc = fetch(ld, ex, false, e);
        int c = 0;
        float l = 0;
        if (!rc) rc = vd_exec_eval_step(ex, &c, &l, e);
        if (!rc) { correct += c; lsum += l; }
    }
    vd_loader_destroy(&ld);
    if (rc) return rc;
    *n = nb * batch;
    *acc = (double)correct / (double)*n;
    *loss = lsum / (double)nb;
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

typedef struct run {
    const vd_net *net;
    vd_exec *ex;
    vd_dataset *ds;
    const vd_train_opts *o;
    float *params, *mom;        /* host copies [param_floats]; NULL until needed (host_state) */
    vd_loader *ld;
} run;

/* The host copies of the parameters and momentum, allocated on first use:
 * a checkpoint to load or save. A run that starts from vd_net_init_params
 * and saves nothing never needs them (AlexNet: 488 MB). */
static int host_state(run *r, vd_err *e) {
    size_t n = (size_t)(r->net->param_floats ? r->net->param_floats : 1);
    if (!r->params && !(r->params = vd_malloc(sizeof(float) * n, e))) return VD_ENOMEM;
    if (!r->mom && !(r->mom = vd_calloc(n, sizeof(float), e))) return VD_ENOMEM;
    return VD_OK;
}

/* samples: the data position to record (the loader's position: every batch
 * it handed out was trained on, see train_loop). */
static int save_at(run *r, int64_t iter, uint64_t samples, bool final, vd_err *e) {
    int proc;
    vd_exec_procs(r->ex, &proc);
    if (proc != 0) return VD_OK;    /* --mpi: process 0 writes the checkpoints */
    int64_t steps = 0;
    int rc = host_state(r, e);
    if (!rc) rc = vd_exec_get_state(r->ex, r->params, r->mom, &steps, e);
    if (rc) return rc;
    vd_train_state st = { .iteration = iter, .sgd_steps = steps,
                          .samples = samples, .seed = r->net->train.seed,
                          .batch = r->net->train.batch };
    st.has_loss_scale = vd_exec_loss_scale(r->ex, &st.loss_scale);   /* math fp16 */
    if (r->o->data_spec)   /* it fits (checked as the run started) */
        snprintf(st.data, sizeof st.data, "%s", r->o->data_spec);
    vd_ckpt_save_opts so = { .dtype = r->o->save_dtype };
    rc = vd_ckpt_save_ex(r->o->save_path, r->net, r->params, r->mom, &st, &so, e);
    if (rc) {
        vd_err_prefix(e, "saving the checkpoint at iteration %lld", (long long)iter);
        return rc;
    }
    vd_train_event ev = { .kind = VD_TEV_SAVE, .iter = iter, .total = r->o->iters,
                          .final = final, .path = r->o->save_path };
    emit(r->o, &ev);
    return VD_OK;
}

static int save(run *r, int64_t iter, bool final, vd_err *e) {
    return save_at(r, iter, vd_loader_position(r->ld), final, e);
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

static int eval(run *r, int64_t iter, bool final, vd_train_result *res, vd_err *e) {
    double acc, loss;
    int64_t n;
    int rc = vd_train_evaluate(r->net, r->ex, r->ds, r->o->loader_threads, r->o->stop, &acc,
                               &loss, &n, e);
    if (rc) return rc;
    if (n == 0) {
        if (final)
            note(r->o, iter, r->o->iters, "no evaluation: the held-out split has %lld images, "
                 "fewer than one batch (%d)",
                 (long long)vd_data_get_info(r->ds)->n[VD_SPLIT_TEST], r->net->train.batch);
        return VD_OK;
    }
    res->eval_acc = acc;
    res->eval_loss = loss;
    res->eval_n = n;
    vd_train_event ev = { .kind = VD_TEV_EVAL, .iter = iter, .total = r->o->iters,
                          .eval_acc = acc, .eval_loss = loss, .eval_n = n, .final = final };
    emit(r->o, &ev);
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
    if ((rc = vd_ckpt_load(o->resume_path, net, r->params, r->mom, &st, e))) return rc;
    if (st.seed != cfg->seed)
        return vd_errf(e, VD_EUSAGE, "%s was trained with seed %llu but this run has seed "
                       "%llu; resume with the checkpoint's seed", o->resume_path,
                       (unsigned long long)st.seed, (unsigned long long)cfg->seed);
    if (st.batch != cfg->batch)
        note(o, st.iteration, o->iters, "resuming at batch %d although %s was trained at "
             "batch %d: the run will not repeat an uninterrupted one exactly", cfg->batch,
             o->resume_path, st.batch);
    if ((rc = vd_exec_set_state(ex, r->params, r->mom, st.sgd_steps, e))) return rc;
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
    if (st.from_prev)
        note(o, *iter, o->iters, "%s.state does not belong to %s (a save was interrupted); "
             "resuming from the previous state %s.state.prev, which does", o->resume_path,
             o->resume_path, o->resume_path);
    note(o, *iter, o->iters, "resumed from %s at iteration %lld", o->resume_path,
         (long long)*iter);
    if (strcmp(st.model_dtype, "F32") != 0)
        note(o, *iter, o->iters, "%s holds %s weights (saved with --save-dtype): the run "
             "continues from the rounded weights and the F32 momentum, so it does not "
             "repeat an uninterrupted run exactly", o->resume_path, st.model_dtype);
    return VD_OK;
}

/* Where the loop's time goes (vd_train_timing): waiting for the loader, in
 * the steps, and in saves / evaluations (not counted as training time);
 * run totals and the progress window's. */
typedef struct loop_clock {
    double t_run0, t_win0, step_sum, win_loss;
    int64_t n_steps_timed, win_n;
    double run_wait, run_step, run_excl, win_wait, win_step, win_excl;
} loop_clock;

/* The progress event after iteration iter (of the window since the last). */
static void progress(run *r, loop_clock *c, int64_t iter, int64_t end, float loss, double lr,
                     bool last) {
    const vd_train_opts *o = r->o;
    double now = vd_now(), span = now - c->t_win0 - c->win_excl;
    double per_iter = span / (double)c->win_n;
    vd_train_event ev = { .kind = VD_TEV_PROGRESS, .iter = iter, .total = o->iters,
                          .loss = loss, .avg_loss = c->win_loss / (double)c->win_n, .lr = lr,
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
    c->win_n = 0;
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
        double t0 = vd_now();
        rc = vd_exec_train_step(ex, (float)lr, *iter, &loss, e);
        double dt = vd_now() - t0;
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
        if (*iter - first > 1 || end - first == 1) { c->step_sum += dt; c->n_steps_timed++; }
        c->win_loss += loss;
        c->win_n++;
        bool last = *iter == end;
        if ((*iter - first) % o->log_every == 0 || last) progress(r, c, *iter, end, loss, lr, last);
        if (stage_next && ah->rc) {   /* the next batch failed: stop after this iteration */
            rc = ah->rc;
            *e = ah->err;
            save_after_error(r, rc, *iter, first, samples, e);
            return rc;
        }
        double tx = vd_now();
        if (save_due(o, *iter) && !last && (rc = save(r, *iter, false, e))) return rc;
        if (eval_due(o, *iter) && !last) {
            rc = eval(r, *iter, false, res, e);
            if (rc == VD_ESTOP) {   /* a stop during it: the run ends as at any stop */
                res->interrupted = true;
                break;
            }
            if (rc) {
                save_after_error(r, rc, *iter, first, samples, e);
                return rc;
            }
        }
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

    int proc, procs = vd_exec_procs(ex, &proc);   /* --mpi: this process's shards */
    vd_loader_cfg lc = { .split = VD_SPLIT_TRAIN, .batch = cfg->batch / (vd_exec_ranks(ex) * procs),
                         .shuffle = true, .seed = cfg->seed, .start = samples,
                         .threads = o->loader_threads, .synth_device = synth_on_device(ex, ds),
                         .rank = proc, .ranks = procs };
    rc = vd_loader_create(&r.ld, ds, &lc, e);
    if (rc) goto done;
    res->loader_threads = vd_loader_threads(r.ld);
    res->synth_device = lc.synth_device;

    if (iter >= end && o->iters > 0) {
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
    res->mean_iter_s = c.n_steps_timed ? c.step_sum / (double)c.n_steps_timed : 0;
    set_timing(&res->timing, iter - first, cfg->batch, res->train_s - c.run_excl, c.run_wait,
               c.run_step);
    if (res->interrupted)
        note(o, iter, o->iters, "stopped at iteration %lld of %lld", (long long)iter,
             (long long)o->iters);

    /* ---- the end ----
     * Save before the final evaluation: a failing evaluation (an undecodable
     * held-out image, ...) must not cost the run its checkpoint. Evaluation
     * does not change the parameters, so the saved bytes are the same.
     * A resumed run that trained nothing leaves its own checkpoint as it is,
     * but a --save elsewhere must still be written (it is what the caller
     * asked for, and the CLI reports it as saved). */
    if (o->save_path && (iter > first || !o->resume_path ||
                         strcmp(o->save_path, o->resume_path) != 0)) {
        rc = save(&r, iter, true, e);
        if (rc) goto done;
    }
    if (o->eval_at_end && !res->interrupted) {
        rc = eval(&r, iter, true, res, e);
        if (rc == VD_ESTOP) {   /* the checkpoint is saved already */
            res->interrupted = true;
            rc = VD_OK;
        }
    }
done:
    ahead_wait(&ah, NULL, 0);              /* no thread outlives the loop */
    vd_exec_set_stage_hook(ex, NULL, NULL);
    pthread_mutex_destroy(&ah.mu);
    vd_loader_destroy(&r.ld);
    vd_free(r.params);
    vd_free(r.mom);
    return rc;
}
