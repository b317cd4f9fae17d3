/* train_job.c — see train_job.h. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "config/train_job.h"
#include "spec/spec.h"
#include "train/lr.h"

static void emit(const vd_train_job *j, const vd_train_event *ev) {
    if (j->hooks && j->hooks->event && j->world.rank == 0) j->hooks->event(ev, j->hooks->ctx);
}

__attribute__((format(printf, 3, 4)))
static void say(const vd_train_job *j, vd_train_event_kind kind, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    emit(j, &(vd_train_event){ .kind = kind, .msg = msg });
}

static int stop_check(const vd_train_job_opts *o, const char *phase, vd_err *e) {
    return o->stop && *o->stop ? vd_errf(e, VD_ESTOP, "stopped %s", phase) : VD_OK;
}

/* The training loop's events: the device memory sampled at each report,
 * the --metrics record, then the hooks. */
static void on_train_event(const vd_train_event *ev, void *ctx) {
    vd_train_job *j = ctx;
    if (j->have_ses && (ev->kind == VD_TEV_PROGRESS || ev->kind == VD_TEV_EVAL))
        vd_session_mem_sample(&j->ses);
    vd_err me = {0};
    if (j->metrics && !j->metrics_failed && vd_metrics_event(j->metrics, ev, &me)) {
        /* the run matters more than its log: warn once and train on */
        say(j, VD_TEV_WARNING, "--metrics: %s; no more records are written", me.msg);
        j->metrics_failed = true;
    }
    emit(j, ev);
}

/* The flags over the spec's train: section, and --resume's seed, batch and
 * data (a copy in j->resume_data when taken from the state file, with its
 * --val-split in *val_split). */
static int apply_train_flags(vd_train_job *j, const vd_train_job_opts *o, vd_config *cfg,
                             const char **data, double *val_split, vd_err *e) {
    vd_train_cfg *tc = &j->net.train;
    if (o->has_lr) { tc->lr = (float)o->lr; tc->has_lr = true; }
    if (o->has_momentum) tc->momentum = (float)o->momentum;
    if (o->has_wd) { tc->weight_decay = (float)o->wd; tc->has_weight_decay = true; }
    if (o->has_seed) tc->seed = o->seed;
    if (o->resume) {
        vd_train_state st;
        int rc = vd_ckpt_peek_state(o->resume, &j->net, &st, e);
        if (rc) return rc;
        j->resume_st = st;
        if (o->has_seed && o->seed != st.seed)
            return vd_errf(e, VD_EUSAGE, "--seed %llu differs from the seed %llu that %s was "
                           "trained with; drop --seed to resume exactly",
                           (unsigned long long)o->seed, (unsigned long long)st.seed, o->resume);
        tc->seed = st.seed;
        if (!cfg->batch) cfg->batch = st.batch;
        /* the data the checkpoint was trained on (state files of older
         * versions record none, and then --data alone decides) */
        if (st.data[0] && !*data) {
            snprintf(j->resume_data, sizeof j->resume_data, "%s", st.data);
            *data = j->resume_data;
            if (!*val_split) *val_split = st.val_split;
            char vs[48] = "";
            if (*val_split) snprintf(vs, sizeof vs, " with --val-split %g", *val_split);
            say(j, VD_TEV_NOTE, "no --data: continuing on the data %s was trained on: %s%s",
                o->resume, *data, vs);
        } else if (st.data[0] && strcmp(st.data, *data) != 0) {
            say(j, VD_TEV_WARNING, "--data %s differs from the data %s was trained on (%s); "
                "continuing on %s, so the run will not repeat an uninterrupted one", *data,
                o->resume, st.data, *data);
        }
        if (st.data[0] && *val_split != st.val_split)
            say(j, VD_TEV_WARNING, "--val-split %g differs from the %g that %s was trained "
                "with (0: none): the training images differ, so the run will not repeat an "
                "uninterrupted one", *val_split, st.val_split, o->resume);
    }
    return VD_OK;
}

/* The optimizer's own flags over the spec's, once vd_config_resolve has
 * settled the optimizer (--optimizer, else train.optimizer), with the checks
 * torch.optim makes of its arguments: SGD's flags (--momentum, --nesterov)
 * with SGD only, AdamW's (--betas, --eps) with AdamW only, Nesterov with
 * momentum > 0; and --resume continues the optimizer it saved. VD_EUSAGE. */
static int apply_optimizer_flags(vd_train_job *j, const vd_train_job_opts *o, vd_err *e) {
    vd_train_cfg *tc = &j->net.train;
    bool adamw = tc->optimizer == VD_OPT_ADAMW;
    const char *sgd_flag = o->has_momentum ? "--momentum" : o->nesterov ? "--nesterov" : NULL;
    const char *adamw_flag = o->has_betas ? "--betas" : o->has_eps ? "--eps" : NULL;
    if (adamw && sgd_flag)
        return vd_errf(e, VD_EUSAGE, "%s is SGD's, and this run's optimizer is adamw (the spec's "
                       "train.optimizer or --optimizer); AdamW's are --betas and --eps", sgd_flag);
    if (!adamw && adamw_flag)
        return vd_errf(e, VD_EUSAGE, "%s is AdamW's, and this run's optimizer is sgd; give "
                       "--optimizer adamw", adamw_flag);
    if (o->nesterov) tc->nesterov = true;
    if (o->has_betas) { tc->beta1 = (float)o->beta1; tc->beta2 = (float)o->beta2; }
    if (o->has_eps) tc->eps = (float)o->eps;
    if (!adamw && tc->nesterov && !(tc->momentum > 0))
        return vd_errf(e, VD_EUSAGE, "Nesterov momentum (%s) needs momentum > 0, as "
                       "torch.optim.SGD's; the momentum is %g", o->nesterov ? "--nesterov"
                       : "the spec's train.nesterov", (double)tc->momentum);
    return o->resume ? vd_ckpt_check_optimizer(&j->resume_st, &j->net, o->resume, e) : VD_OK;
}

/* The run's length in iterations: --iters, --epochs, the spec's iters or
 * epochs, else one epoch. */
static int run_length(vd_train_job *j, const vd_train_job_opts *o, vd_err *e) {
    vd_train_cfg *tc = &j->net.train;
    const vd_data_info *di = j->data_info;
    int64_t per_epoch = (di->n[VD_SPLIT_TRAIN] + tc->batch - 1) / tc->batch;
    int64_t epochs = o->has_iters ? 0 : o->has_epochs ? o->epochs
                   : tc->iters > 0 ? 0 : tc->epochs > 0 ? tc->epochs : 1;
    uint64_t prod = 0;
    if (epochs > 0 && (!vd_mul_u64((uint64_t)epochs, (uint64_t)per_epoch, &prod) ||
                       prod > (uint64_t)1 << 53))
        return vd_errf(e, VD_EUSAGE, "%lld epochs of %lld iterations (%s) is too many "
                       "iterations", (long long)epochs, (long long)per_epoch, di->desc);
    if (o->has_iters) j->iters = o->iters;
    else if (tc->iters > 0 && !o->has_epochs) j->iters = tc->iters;
    else j->iters = (int64_t)prod;
    tc->iters = j->iters;
    if (o->stop_at > j->iters)
        return vd_errf(e, VD_EUSAGE, "--stop-at %lld is beyond the run's %lld iterations (the "
                       "last iteration it can stop after is %lld)", (long long)o->stop_at,
                       (long long)j->iters, (long long)j->iters);
    return VD_OK;
}

/* --keep's numbered checkpoints: the iterations first < ITER < end that
 * --save-every divides (the last one is --save's), each a model file and
 * its .state and .state.prev. */
typedef struct numbered { const char *save; int64_t every, first, end; } numbered;
static bool is_numbered(const char *name, const void *ctx) {
    const numbered *nb = ctx;
    static const char *const sfx[] = { "", ".state", ".state.prev" };
    char base[NAME_MAX + 1];
    size_t n = strlen(name);
    for (int k = 0; k < 3; k++) {
        size_t sl = strlen(sfx[k]);
        if (n < sl || n - sl > NAME_MAX || strcmp(name + n - sl, sfx[k]) != 0) continue;
        memcpy(base, name, n - sl);
        base[n - sl] = 0;
        int64_t it;
        if (vd_ckpt_tagged_iter(nb->save, base, &it) && it > nb->first && it < nb->end &&
            it % nb->every == 0)
            return true;
    }
    return false;
}

/* No output over an input or another output (--save may replace the
 * checkpoint it resumes from: the run reads it whole first), --save-best's
 * and --keep's derived names included. */
static int check_paths(const vd_train_job *j, const vd_train_job_opts *o, const char *data,
                       vd_err *e) {
    char *best = o->save_best ? vd_ckpt_tagged(o->save, "best", e) : NULL;
    if (o->save_best && !best) return VD_ENOMEM;
    const vd_run_path rp[] = {
        { .flag = "the spec", .path = o->spec },
        { .flag = "--profile", .path = o->cfg.profile },
        { .flag = "--profile-out", .path = o->cfg.profile_out, .output = true },
        { .flag = "--init", .path = o->init },
        { .flag = "--resume", .path = o->resume },
        { .flag = "--resume", .path = o->resume, .suffix = ".state" },
        { .flag = "--data", .path = vd_data_dir(data), .tree = true },
        { .flag = "--save", .path = o->save, .output = true, .may_replace = "--resume" },
        { .flag = "--save", .path = o->save, .suffix = ".state", .output = true,
          .may_replace = "--resume" },
        { .flag = "--save", .path = o->save, .suffix = ".state.prev", .output = true,
          .may_replace = "--resume" },
        { .flag = "--save-best", .path = best, .output = true, .rename = "--save" },
        { .flag = "--save-best", .path = best, .suffix = ".state", .output = true,
          .rename = "--save" },
        { .flag = "--save-best", .path = best, .suffix = ".state.prev", .output = true,
          .rename = "--save" },
        { .flag = "--metrics", .path = o->metrics, .output = true },
        { .flag = "--plan-json", .path = o->plan_json, .output = true },
        { .flag = "--step-times-out", .path = o->step_times_out, .output = true },
    };
    int rc;
    if (o->keep > 0) {
        numbered nb = { .save = o->save, .every = o->save_every,
                        .first = o->resume ? j->resume_st.iteration : 0,
                        .end = o->stop_at > 0 ? o->stop_at : j->iters };
        const char *slash = strrchr(o->save, '/');
        char *dir = slash ? vd_strfmt(e, "%.*s", slash == o->save ? 1 : (int)(slash - o->save),
                                      o->save) : vd_strdup(".", e);
        if (!dir) { vd_free(best); return VD_ENOMEM; }
        vd_run_family f = { .flag = "the numbered checkpoint (--keep)", .rename = "--save",
                            .dir = dir, .is_member = is_numbered, .ctx = &nb };
        rc = vd_run_paths_check_family(rp, (int)VD_ARRAY_LEN(rp), &f, e);
        vd_free(dir);
    } else {
        rc = vd_run_paths_check(rp, (int)VD_ARRAY_LEN(rp), e);
    }
    /* fail before training, not at its first improvement, when it cannot be written */
    if (!rc && best && j->world.rank == 0 && (rc = vd_output_check(best, e)))
        vd_err_prefix(e, "--save-best");
    vd_free(best);
    return rc;
}

/* --plan-json FILE: the plan that runs, as vdnn-plan --format json prints it. */
typedef struct plan_out { const vd_plan *plan; const vd_net *net; } plan_out;
static int write_plan_json(FILE *f, const void *ctx, vd_err *e) {
    const plan_out *po = ctx;
    return vd_plan_write_json(f, po->plan, po->net, NULL, e);
}

static void session_note(void *ctx, const char *msg) { say(ctx, VD_TEV_NOTE, "%s", msg); }

/* Backend, layers, profile, plan and executor (train/session.h); with
 * --gpus / --mpi the other ranks' too, and the group of all. */
static int set_up(vd_train_job *j, const vd_train_job_opts *o, vd_err *e) {
    vd_config_run *run = &j->run;
    if (run->dp) {   /* threads and the communicator first (train/dp.h) */
        int rc = o->mpi ? vd_dp_open_mpi(&j->dp, &j->world, run->session.backend,
                                         run->session.device, e)
                        : vd_dp_open(&j->dp, run->ranks, run->session.backend,
                                     run->session.device, e);
        if (rc) return rc;
        vd_dp_session_opts(&j->dp, 0, &run->session);
    }
    run->session.backend_opts.stop = o->stop;   /* profiling and cuDNN's tuning */
    run->session.note = session_note;
    run->session.note_ctx = j;
    int rc = vd_session_open(&j->ses, &j->net, run->batch, &run->session, e);
    j->have_ses = rc == VD_OK;
    if (!rc) rc = stop_check(o, "after profiling", e);
    if (rc) return rc;
    vd_session *s = &j->ses;
    if (s->backend_why) say(j, VD_TEV_NOTE, "backend %s (auto: %s)", s->be->name, s->backend_why);
    say(j, VD_TEV_NOTE, "profile %s (%s, %.1f s)%s%s", s->prof.source, s->prof_how, s->prof_s,
        o->cfg.profile_out ? ", saved to " : "", o->cfg.profile_out ? o->cfg.profile_out : "");
    char note[512];
    if (vd_session_profile_note(s, note, sizeof note)) say(j, VD_TEV_NOTE, "note: %s", note);
    vd_config_budget(run, s, NULL);
    run->plan.stop = o->stop;
    /* the walk stays eager with these (vdnn-train(1), --graph) */
    if (o->poison || run->session.backend_opts.sync_debug || run->session.mem_trace)
        run->plan.graph = VD_GRAPH_OFF;
    if (j->hooks && j->hooks->planning) j->hooks->planning(&run->plan, j->hooks->ctx);
    rc = vd_session_plan(s, &run->plan, &j->plan, e);
    j->have_plan = rc == VD_OK || rc == VD_EBUDGET;
    if (rc == VD_OK || rc == VD_EBUDGET) {   /* a stop ends a search early: not a budget error */
        int src = stop_check(o, "while planning", e);
        if (src) rc = src;
    }
    if (rc) return rc;
    if (run->dp && (rc = vd_plan_dp(&j->plan, &j->net, &s->prof, run->ranks, 0, e))) return rc;
    /* the lower bound too, so that the file is what vdnn-plan prints */
    if (o->plan_json &&
        (rc = vd_plan_copy_bound(&j->net, &s->prof, &j->plan, run->plan.budget, &j->plan.bound, e)))
        return rc;
    if (o->plan_json && (rc = vd_write_stream_atomic(o->plan_json, write_plan_json,
                                                     &(plan_out){&j->plan, &j->net}, e))) {
        vd_err_prefix(e, "--plan-json");
        return rc;
    }
    rc = vd_session_exec(s, &j->plan, o->poison, &j->ex, e);
    if (!rc) rc = stop_check(o, "before training", e);
    if (rc || !run->dp) return rc;
    /* ranks 1..N-1 plan for the same budget on their own devices */
    rc = vd_dp_start_peers(&j->dp, &j->net, &run->session, &run->plan, run->budget_given,
                           o->poison, e);
    return rc ? rc : vd_dp_group(&j->dp, j->ex, &j->grp, e);
}

static int train(vd_train_job *j, const vd_train_job_opts *o, vd_err *e) {
    int64_t iters = j->iters;
    int64_t log_every = o->has_log_every ? o->log_every : (iters / 20 > 0 ? iters / 20 : 1);
    if (!o->has_log_every && log_every > 100) log_every = 100;
    vd_train_opts to = {
        .iters = iters, .stop_at = o->stop_at, .save_path = o->save,
        .save_every = o->save_every, .keep = o->keep, .save_best = o->save_best,
        .early_stop = o->early_stop, .save_dtype = o->save_dtype,
        .resume_path = o->resume, .init_path = o->init, .init_skip = o->init_skip,
        .eval_every = o->has_eval_every && o->eval_every > 0 ? o->eval_every : 0,
        .eval_at_end = !(o->has_eval_every && o->eval_every < 0),
        .log_every = log_every, .stop = o->stop, .loader_threads = o->loader_threads,
        .data_spec = o->data && *o->data ? o->data : "synthetic", .val_split = o->val_split,
        .cb = j->world.rank == 0 ? on_train_event : NULL, .user = j,
    };
    return vd_train_run(&j->net, j->grp ? j->grp : j->ex, j->ds, &to, &j->res, e);
}

int vd_train_job_run(vd_train_job *j, const vd_train_job_opts *o, const vd_train_job_hooks *hooks,
                     vd_err *e) {
    memset(j, 0, sizeof *j);
    vd_net_init(&j->net);
    j->hooks = hooks;
    j->world = (vd_world){ .rank = 0, .size = 1 };
    vd_config cfg = o->cfg;
    const char *data = o->data;
    double val_split = o->val_split;
    vd_train_job_opts mine = *o;
    int rc;
    if (o->mpi) {
        /* this process is rank world.rank of the job; the ranks are its
         * processes (as --gpus world.size); rank 0 alone writes */
        if ((rc = vd_mpi_init(&j->world, e))) return rc;
        cfg.gpus = j->world.size;
        if (j->world.rank > 0) mine.metrics = mine.plan_json = mine.step_times_out = cfg.profile_out = NULL;
    }
    o = &mine;
    rc = vd_spec_load(o->spec, &j->net, e);
    if (!rc) rc = stop_check(o, "after reading the spec", e);
    if (!rc) rc = apply_train_flags(j, o, &cfg, &data, &val_split, e);
    if (rc) return rc;
    /* batch, backend, profile source, policy, budget, ... (config.h) */
    if ((rc = vd_config_resolve(&cfg, &j->net, false, &j->run, e))) {
        if (o->mpi) vd_err_prefix(e, "--mpi under mpirun -np %d", j->world.size);
        return rc;
    }
    if ((rc = apply_optimizer_flags(j, o, e)) ||
        (rc = vd_lr_validate(&j->net.train.lr_policy, j->net.train.lr, e)))
        return rc;
    mine.data = data;
    mine.val_split = val_split;
    rc = vd_data_open(data, &j->net, j->net.train.batch, j->net.train.seed, o->augment, &j->ds, e);
    if (!rc && val_split > 0) rc = vd_data_hold_out(j->ds, val_split, e);
    if (rc == VD_EUSAGE && data == j->resume_data) {
        /* not the command line's fault: the state file holds a bad spec */
        vd_err_prefix(e, "the data spec recorded in %s.state", o->resume);
        rc = e->code = VD_EDATA;
    }
    if (!rc) rc = stop_check(o, "after opening the data", e);
    if (rc) return rc;
    j->data_info = vd_data_get_info(j->ds);
    if (j->net.norm.n && vd_data_is_synthetic(j->ds))
        say(j, VD_TEV_NOTE, "the spec's data.normalize does not apply to synthetic data "
            "(its pixels are made normalised)");
    if ((rc = run_length(j, o, e)) || (rc = check_paths(j, o, data, e))) return rc;
    /* fail before training, not after it, when --save cannot be written */
    if (o->save && j->world.rank == 0 && (rc = vd_output_check(o->save, e))) {
        vd_err_prefix(e, "--save");
        return rc;
    }
    if (o->metrics && (rc = vd_metrics_open(&j->metrics, o->metrics, e))) {
        vd_err_prefix(e, "--metrics");
        return rc;
    }
    if ((rc = set_up(j, o, e))) return rc;
    if (hooks && hooks->ready && j->world.rank == 0) hooks->ready(j, hooks->ctx);
    return train(j, o, e);
}

void vd_train_job_close(vd_train_job *j) {
    vd_err ce = {0};
    if (vd_metrics_close(&j->metrics, &ce) && !j->metrics_failed)
        say(j, VD_TEV_WARNING, "--metrics: %s", ce.msg);
    vd_exec_destroy(&j->grp);
    vd_dp_close_peers(&j->dp);
    vd_exec_destroy(&j->ex);
    if (j->have_plan) vd_plan_free(&j->plan);
    if (j->have_ses) vd_session_close(&j->ses);
    vd_dp_close(&j->dp);
    vd_data_close(&j->ds);
    vd_config_run_free(&j->run);
    vd_net_free(&j->net);
}
