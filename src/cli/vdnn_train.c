/* vdnn-train — train a network from a NET.yaml spec within a device memory
 * budget. Flags override the spec's train: section. Progress goes to stderr,
 * the final report to stdout. Exit status: 0, or the VD_E* code of the error
 * (130 when interrupted by SIGINT after saving). See man vdnn-train(1). */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "vd_config.h"
#include "cli/cli_common.h"
#include "util/util.h"
#include "net/net.h"
#include "spec/spec.h"
#include "backend/backend.h"
#include "plan/plan.h"
#include "exec/exec.h"
#include "data/data.h"
#include "train/train.h"
#include "train/ckpt.h"
#include "train/lr.h"

static const char *const PROG = "vdnn-train";

static void usage(FILE *f) {
    fprintf(f,
"usage: vdnn-train NET.yaml [options]\n"
"\n"
"Train the network described by NET.yaml (see vdnn-net(5)) inside a device\n"
"memory budget, offloading activations to host memory as the plan decides.\n"
"Options override the spec's train: section. Without --data the net trains on\n"
"synthetic data.\n"
"\n"
"Training:\n"
"  --batch N            batch size\n"
"  --iters N            total iterations (a resumed run continues up to N;\n"
"                       0: only evaluate, e.g. the weights of --init)\n"
"  --epochs N           iterations = N * ceil(train images / batch) (if no --iters)\n"
"  --stop-at N          stop after iteration N (the LR schedule still spans --iters;\n"
"                       with --save, resume later to finish the run)\n"
"  --lr F               base learning rate (the spec's lr_policy applies to it)\n"
"  --momentum F         SGD momentum (torch.optim.SGD semantics)\n"
"  --wd F               weight decay (alias --weight-decay)\n"
"  --seed N             seed for initialisation, data order and dropout\n"
"  --data SPEC          mnist:DIR | cifar10:DIR | folder:DIR | synthetic[:TRAIN[,TEST]]\n"
"  --augment            folder data: random crop along the longer side + flip\n"
"  --loader-threads N   data loader threads (default: 1, folder: up to 8)\n"
"\n"
"Checkpoints (safetensors; FILE loads into torchvision, FILE.state holds the rest):\n"
"  --save FILE          write a checkpoint at the end (and on SIGINT)\n"
"  --save-every N       also write it every N iterations\n"
"  --resume FILE        continue exactly: weights, momentum, iteration, data position\n"
"  --init FILE          start from FILE's weights only\n"
"\n"
"Memory plan and device:\n"
"  --backend B          cpu | cuda | auto (default: auto = cuda if available)\n"
"  --device N           CUDA device index (default 0)\n"
"  --budget SIZE        device memory budget, e.g. 12G, 512M (default: what the\n"
"                       plan needs)\n"
"  --policy P           none | all | conv | dyn (default: none)\n"
"  --prefetch P         auto | paper (when prefetches are issued; default auto)\n"
"  --profile FILE       plan with this measured profile (JSON, see vdnn-plan(1))\n"
"  --profile-out FILE   write the profile used to FILE\n"
"  --math M             fp32 | tf32 (default fp32)\n"
"  --deterministic      deterministic algorithms only\n"
"  --poison             NaN-fill freed device memory (debugging)\n"
"\n"
"Reporting:\n"
"  --eval-every N       evaluate on the held-out split every N iterations (and at\n"
"                       the end; 0 = only at the end, -1 = never)\n"
"  --log-every N        progress every N iterations (default: about 20 reports)\n"
"  --quiet              no progress on stderr; only the final report\n"
"  --help               this text\n"
"  --version            version and build features\n"
"\n"
"Exit status: 0 ok, 2 usage, 3 spec, 4 io, 5 data, 6 budget, 7 device,\n"
"8 unsupported, 9 nomem, 10 numeric (loss NaN/Inf), 130 interrupted.\n");
}

/* ---- options ------------------------------------------------------------- */

typedef struct opts {
    const char *spec;
    int64_t batch, iters, epochs, stop_at, seed, save_every, eval_every, log_every, device, threads;
    bool has_batch, has_iters, has_epochs, has_seed, has_lr, has_mom, has_wd;
    bool has_eval_every, has_log_every;
    double lr, momentum, wd;
    const char *data, *save, *resume, *init, *profile, *profile_out;
    const char *backend, *math;
    vd_policy policy;
    vd_prefetch prefetch;
    uint64_t budget;
    bool augment, deterministic, poison, quiet;
} opts;

typedef struct flag {
    const char *name;
    bool arg;
} flag;

static const flag FLAGS[] = {
    {"batch", true}, {"iters", true}, {"epochs", true}, {"stop-at", true}, {"lr", true}, {"momentum", true},
    {"wd", true}, {"weight-decay", true}, {"seed", true}, {"data", true}, {"augment", false},
    {"loader-threads", true}, {"save", true}, {"save-every", true}, {"resume", true},
    {"init", true}, {"backend", true}, {"device", true}, {"budget", true}, {"policy", true},
    {"prefetch", true}, {"profile", true}, {"profile-out", true}, {"math", true},
    {"deterministic", false}, {"poison", false}, {"eval-every", true}, {"log-every", true},
    {"quiet", false}, {"help", false}, {"version", false},
};

static int int_arg(const char *name, const char *v, int64_t lo, int64_t hi, int64_t *out,
                   vd_err *e) {
    int64_t x;
    if (vd_parse_i64(v, &x, NULL) != 0 || x < lo || x > hi)
        return vd_errf(e, VD_EUSAGE, "--%s: '%s' is not an integer in [%lld, %lld]", name, v,
                       (long long)lo, (long long)hi);
    *out = x;
    return VD_OK;
}

static int real_arg(const char *name, const char *v, double lo, double *out, vd_err *e) {
    double x;
    if (vd_parse_f64(v, &x, NULL) != 0 || !isfinite(x) || x < lo)
        return vd_errf(e, VD_EUSAGE, "--%s: '%s' is not a number >= %g", name, v, lo);
    *out = x;
    return VD_OK;
}

static int choice(const char *name, const char *v, const char *const *c, int n, vd_err *e) {
    for (int i = 0; i < n; i++)
        if (strcmp(v, c[i]) == 0) return VD_OK;
    const char *s = vd_suggest(v, c, n);
    char list[200] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, c[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n) strncat(list, " | ", sizeof list - strlen(list) - 1);
    }
    return vd_errf(e, VD_EUSAGE, "--%s: unknown value '%s' (expected %s)%s%s%s", name, v, list,
                   s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "");
}

/* Returns VD_OK, an error, or -1 for --help / --version (already printed). */
static int parse_args(int argc, char **argv, opts *o, vd_err *e) {
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->policy = VD_POLICY_NONE;
    o->prefetch = VD_PREFETCH_AUTO;
    o->math = "fp32";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0) {
            if (o->spec)
                return vd_errf(e, VD_EUSAGE, "unexpected argument '%s' (one NET.yaml only)", a);
            o->spec = a;
            continue;
        }
        if (strcmp(a, "-h") == 0) a = "--help";
        if (strncmp(a, "--", 2) != 0)
            return vd_errf(e, VD_EUSAGE, "unknown option '%s' (options are --long; see --help)", a);
        char name[64];
        const char *eq = strchr(a + 2, '='), *val = NULL;
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        snprintf(name, sizeof name, "%.*s", (int)(nl < 63 ? nl : 63), a + 2);
        const flag *f = NULL;
        for (size_t k = 0; k < VD_ARRAY_LEN(FLAGS); k++)
            if (strcmp(FLAGS[k].name, name) == 0) f = &FLAGS[k];
        if (!f) {
            const char *cands[VD_ARRAY_LEN(FLAGS)];
            for (size_t k = 0; k < VD_ARRAY_LEN(FLAGS); k++) cands[k] = FLAGS[k].name;
            const char *s = vd_suggest(name, cands, (int)VD_ARRAY_LEN(FLAGS));
            return vd_errf(e, VD_EUSAGE, "unknown option '--%s'%s%s%s (see --help)", name,
                           s ? "; did you mean '--" : "", s ? s : "", s ? "'?" : "");
        }
        if (f->arg) {
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            else return vd_errf(e, VD_EUSAGE, "option --%s needs a value", name);
        } else if (eq) {
            return vd_errf(e, VD_EUSAGE, "option --%s takes no value", name);
        }
        int rc = VD_OK;
        const int64_t BIG = (int64_t)1 << 53;
        if (!strcmp(name, "help")) { usage(stdout); return -1; }
        else if (!strcmp(name, "version")) { vd_cli_version(PROG); return -1; }
        else if (!strcmp(name, "batch")) { rc = int_arg(name, val, 1, 1 << 24, &o->batch, e); o->has_batch = true; }
        else if (!strcmp(name, "iters")) { rc = int_arg(name, val, 0, BIG, &o->iters, e); o->has_iters = true; }
        else if (!strcmp(name, "epochs")) { rc = int_arg(name, val, 1, 1 << 30, &o->epochs, e); o->has_epochs = true; }
        else if (!strcmp(name, "stop-at")) rc = int_arg(name, val, 1, BIG, &o->stop_at, e);
        else if (!strcmp(name, "seed")) { rc = int_arg(name, val, 0, INT64_MAX, &o->seed, e); o->has_seed = true; }
        else if (!strcmp(name, "save-every")) rc = int_arg(name, val, 0, BIG, &o->save_every, e);
        else if (!strcmp(name, "eval-every")) { rc = int_arg(name, val, -1, BIG, &o->eval_every, e); o->has_eval_every = true; }
        else if (!strcmp(name, "log-every")) { rc = int_arg(name, val, 1, BIG, &o->log_every, e); o->has_log_every = true; }
        else if (!strcmp(name, "device")) rc = int_arg(name, val, 0, 1024, &o->device, e);
        else if (!strcmp(name, "loader-threads")) rc = int_arg(name, val, 1, 256, &o->threads, e);
        else if (!strcmp(name, "lr")) { rc = real_arg(name, val, 0, &o->lr, e); o->has_lr = true; }
        else if (!strcmp(name, "momentum")) { rc = real_arg(name, val, 0, &o->momentum, e); o->has_mom = true; }
        else if (!strcmp(name, "wd") || !strcmp(name, "weight-decay")) { rc = real_arg(name, val, 0, &o->wd, e); o->has_wd = true; }
        else if (!strcmp(name, "data")) o->data = val;
        else if (!strcmp(name, "save")) o->save = val;
        else if (!strcmp(name, "resume")) o->resume = val;
        else if (!strcmp(name, "init")) o->init = val;
        else if (!strcmp(name, "profile")) o->profile = val;
        else if (!strcmp(name, "profile-out")) o->profile_out = val;
        else if (!strcmp(name, "augment")) o->augment = true;
        else if (!strcmp(name, "deterministic")) o->deterministic = true;
        else if (!strcmp(name, "poison")) o->poison = true;
        else if (!strcmp(name, "quiet")) o->quiet = true;
        else if (!strcmp(name, "budget")) {
            rc = vd_parse_size(val, &o->budget, e);
            if (rc) vd_err_prefix(e, "--budget");
            else if (o->budget == 0) rc = vd_errf(e, VD_EUSAGE, "--budget must be positive");
        } else if (!strcmp(name, "backend")) {
            static const char *const c[] = {"cpu", "cuda", "auto"};
            rc = choice(name, val, c, 3, e);
            o->backend = val;
        } else if (!strcmp(name, "policy")) {
            if ((rc = vd_policy_parse(val, &o->policy, e))) vd_err_prefix(e, "--policy");
        } else if (!strcmp(name, "prefetch")) {
            if ((rc = vd_prefetch_parse(val, &o->prefetch, e))) vd_err_prefix(e, "--prefetch");
        } else if (!strcmp(name, "math")) {
            static const char *const c[] = {"fp32", "tf32"};
            rc = choice(name, val, c, 2, e);
            o->math = val;
        }
        if (rc) return rc;
    }
    if (!o->spec) return vd_errf(e, VD_EUSAGE, "missing NET.yaml (usage: vdnn-train NET.yaml "
                                 "[options]; see --help)");
    if (o->resume && o->init)
        return vd_errf(e, VD_EUSAGE, "--resume and --init exclude each other");
    if (o->save_every && !o->save)
        return vd_errf(e, VD_EUSAGE, "--save-every needs --save FILE");
    return VD_OK;
}

/* ---- progress ------------------------------------------------------------- */

typedef struct ui {
    bool quiet, tty;
    bool line_open;             /* a \r progress line is on screen */
    int batch;
} ui;

static void fmt_dur(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) { snprintf(buf, n, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static void close_line(ui *u) {
    if (u->line_open) { fputc('\n', stderr); u->line_open = false; }
}

static void on_event(const vd_train_event *ev, void *user) {
    ui *u = user;
    if (u->quiet) return;
    char eta[32];
    switch (ev->kind) {
    case VD_TEV_START:
        close_line(u);
        fprintf(stderr, "%s: training iterations %lld..%lld\n", PROG, (long long)ev->iter + 1,
                (long long)ev->total);
        break;
    case VD_TEV_PROGRESS:
        fmt_dur(ev->eta_s, eta, sizeof eta);
        if (u->tty) fputs("\r\033[K", stderr);
        fprintf(stderr, "iter %lld/%lld  loss %.4f  avg %.4f  lr %.4g  %.1f img/s  ETA %s",
                (long long)ev->iter, (long long)ev->total, (double)ev->loss, ev->avg_loss,
                ev->lr, ev->img_per_s, eta);
        if (u->tty && !ev->final) u->line_open = true;
        else { fputc('\n', stderr); u->line_open = false; }
        break;
    case VD_TEV_EVAL:
        close_line(u);
        fprintf(stderr, "eval  iter %lld  accuracy %.2f%%  loss %.4f  (%lld images)\n",
                (long long)ev->iter, 100.0 * ev->eval_acc, ev->eval_loss, (long long)ev->eval_n);
        break;
    case VD_TEV_SAVE:
        close_line(u);
        fprintf(stderr, "saved %s (+ .state) at iteration %lld\n", ev->path, (long long)ev->iter);
        break;
    case VD_TEV_NOTE:
        close_line(u);
        fprintf(stderr, "%s: %s\n", PROG, ev->msg);
        break;
    }
    fflush(stderr);
}

static volatile sig_atomic_t g_stop;   /* set by SIGINT; read by the training loop */
static void on_sigint(int sig) { (void)sig; g_stop = 1; }

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    opts o;
    vd_err e = {0};
    int rc = parse_args(argc, argv, &o, &e);
    if (rc < 0) return 0;
    if (rc) return vd_cli_fail(PROG, &e);

    vd_net net;
    vd_net_init(&net);
    vd_backend *be = NULL;
    vd_dataset *ds = NULL;
    vd_profile prof;
    memset(&prof, 0, sizeof prof);
    vd_plan plan;
    memset(&plan, 0, sizeof plan);
    bool have_prof = false, have_plan = false;
    vd_exec *ex = NULL;
    ui u = { .quiet = o.quiet, .tty = isatty(STDERR_FILENO) != 0 };

    rc = vd_spec_load(o.spec, &net, &e);
    if (rc) goto out;

    /* ---- flags over the spec's train: section ---- */
    vd_train_cfg *tc = &net.train;
    if (o.has_batch) tc->batch = (int)o.batch;
    if (o.has_lr) tc->lr = (float)o.lr;
    if (o.has_mom) tc->momentum = (float)o.momentum;
    if (o.has_wd) tc->weight_decay = (float)o.wd;
    if (o.has_seed) tc->seed = (uint64_t)o.seed;
    if (tc->batch < 1) tc->batch = 32;
    if (!(tc->lr > 0)) tc->lr = 0.01f;
    if (o.resume) {
        vd_train_state st;
        rc = vd_ckpt_peek_state(o.resume, &net, &st, &e);
        if (rc) goto out;
        if (o.has_seed && (uint64_t)o.seed != st.seed) {
            rc = vd_errf(&e, VD_EUSAGE, "--seed %lld differs from the seed %llu that %s was "
                         "trained with; drop --seed to resume exactly", (long long)o.seed,
                         (unsigned long long)st.seed, o.resume);
            goto out;
        }
        tc->seed = st.seed;
        if (!o.has_batch) tc->batch = st.batch;
    }
    rc = vd_lr_validate(&tc->lr_policy, tc->lr, &e);
    if (rc) goto out;
    rc = vd_net_finalize(&net, &e);     /* re-check at the final batch size */
    if (rc) goto out;
    vd_schedule_inplace(&net);

    /* ---- data ---- */
    rc = vd_data_open(o.data, &net, tc->batch, tc->seed, o.augment, &ds, &e);
    if (rc) goto out;
    const vd_data_info *di = vd_data_get_info(ds);
    int64_t per_epoch = (di->n[VD_SPLIT_TRAIN] + tc->batch - 1) / tc->batch;
    int64_t iters;
    if (o.has_iters) iters = o.iters;
    else if (o.has_epochs) iters = o.epochs * per_epoch;
    else if (tc->iters > 0) iters = tc->iters;
    else if (tc->epochs > 0) iters = tc->epochs * per_epoch;
    else iters = per_epoch;
    tc->iters = iters;

    /* ---- backend ---- */
    bool auto_be = strcmp(o.backend, "auto") == 0;
    bool use_cuda = auto_be ? vd_backend_cuda_available() : strcmp(o.backend, "cuda") == 0;
    if (use_cuda) rc = vd_backend_cuda_create(&be, (int)o.device, &e);
    else rc = vd_backend_cpu_create(&be, &e);
    if (rc) goto out;
    if (auto_be && !o.quiet)
        fprintf(stderr, "%s: backend %s (auto: %s)\n", PROG, be->name,
                use_cuda ? "a CUDA device is available" : "no CUDA device");
    vd_math math = strcmp(o.math, "tf32") == 0 ? VD_MATH_TF32 : VD_MATH_FP32;
    rc = be->layer_setup(be, &net, tc->batch, math, o.deterministic, &e);
    if (rc) goto out;

    /* ---- profile and plan ---- */
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    po.batch = tc->batch;
    po.budget = o.budget;
    po.policy = o.policy;
    po.prefetch = o.prefetch;
    if (o.profile) rc = vd_profile_load(o.profile, &net, tc->batch, &prof, &e);
    else rc = vd_profile_backend(&net, tc->batch, be, use_cuda ? &vd_device_h200 : &vd_device_cpu,
                                 &prof, &e);
    if (rc) goto out;
    have_prof = true;
    if (o.profile_out) {
        rc = vd_profile_save(o.profile_out, &prof, &e);
        if (rc) goto out;
    }
    rc = vd_plan_build(&net, &prof, &po, &plan, &e);
    have_plan = rc == VD_OK || rc == VD_EBUDGET;
    if (rc) goto out;
    vd_exec_opts eo = { .poison = o.poison, .math = math, .deterministic = o.deterministic,
                        .layers_ready = true };
    rc = vd_exec_create(&ex, &net, &plan, be, &eo, &e);
    if (rc) goto out;

    if (!o.quiet) {
        char b1[32], b2[32];
        fprintf(stderr, "%s: net %s (%lld parameters), batch %d, %lld iterations "
                "(%.2f epochs of %s)\n", PROG, net.name, (long long)net.n_trainable, tc->batch,
                (long long)iters, (double)iters * tc->batch / (double)di->n[VD_SPLIT_TRAIN],
                di->desc);
        fprintf(stderr, "%s: lr %g (%s%s), momentum %g, weight decay %g, seed %llu\n", PROG,
                (double)tc->lr, vd_lr_policy_name(&tc->lr_policy),
                tc->lr_policy.warmup ? " + warmup" : "", (double)tc->momentum,
                (double)tc->weight_decay, (unsigned long long)tc->seed);
        fprintf(stderr, "%s: plan: policy %s, budget %s, peak %s, offload %s/iter, "
                "predicted %.4f s/iter (%s)\n", PROG, vd_policy_name(plan.policy),
                vd_fmt_bytes(plan.budget, b1, sizeof b1), vd_fmt_bytes(plan.live_peak, b2, sizeof b2),
                vd_fmt_bytes(plan.offload_bytes, (char[32]){0}, 32), plan.sim.iter_s, prof.source);
    }

    /* ---- train ---- */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND;         /* a second Ctrl-C kills at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    u.batch = tc->batch;
    int64_t log_every = o.has_log_every ? o.log_every : (iters / 20 > 0 ? iters / 20 : 1);
    if (!o.has_log_every && log_every > 100) log_every = 100;
    vd_train_opts to = {
        .iters = iters, .stop_at = o.stop_at, .save_path = o.save, .save_every = o.save_every,
        .resume_path = o.resume, .init_path = o.init,
        .eval_every = o.has_eval_every && o.eval_every > 0 ? o.eval_every : 0,
        .eval_at_end = !(o.has_eval_every && o.eval_every < 0),
        .log_every = log_every, .stop = &g_stop, .loader_threads = (int)o.threads,
        .cb = on_event, .user = &u,
    };
    vd_train_result res;
    rc = vd_train_run(&net, ex, ds, &to, &res, &e);
    close_line(&u);
    if (rc) goto out;

    /* ---- report ---- */
    vd_exec_stats st;
    vd_exec_get_stats(ex, &st);
    char a[32], b[32], c[32], d[32], f[32];
    bool trained = res.iters_done > res.first_iter;
    if (trained)
        printf("trained %s: iterations %lld..%lld in %.1f s, final loss %.4f\n", net.name,
               (long long)res.first_iter, (long long)res.iters_done, res.train_s,
               (double)res.last_loss);
    else
        printf("%s: no training iterations ran (at iteration %lld)\n", net.name,
               (long long)res.iters_done);
    if (res.eval_n)
        printf("test accuracy %.2f%%  loss %.4f  (%lld held-out images)\n", 100.0 * res.eval_acc,
               res.eval_loss, (long long)res.eval_n);
    printf("memory: pool %s, high-water %s, live peak %s%s, host store %s\n",
           vd_fmt_bytes(st.pool_bytes, a, sizeof a),
           vd_fmt_bytes(trained ? st.pool_hwm : st.eval_pool_hwm, b, sizeof b),
           vd_fmt_bytes(trained ? st.live_peak : st.eval_live_peak, c, sizeof c),
           trained ? "" : " (evaluation)", vd_fmt_bytes(st.host_store_bytes, d, sizeof d));
    printf("copies per iteration: offloaded %s, prefetched %s\n",
           vd_fmt_bytes(st.offload_bytes_iter, a, sizeof a),
           vd_fmt_bytes(st.prefetch_bytes_iter, f, sizeof f));
    if (res.mean_iter_s > 0)
        printf("iteration time: measured %.4f s (%.1f img/s), predicted %.4f s (%s, %+.0f%%)\n",
               res.mean_iter_s, tc->batch / res.mean_iter_s, plan.sim.iter_s, prof.source,
               plan.sim.iter_s > 0 ? 100.0 * (res.mean_iter_s - plan.sim.iter_s) / plan.sim.iter_s : 0.0);
    if (res.interrupted) {
        fprintf(stderr, "%s: interrupted at iteration %lld%s\n", PROG, (long long)res.iters_done,
                o.save ? " (checkpoint saved)" : "");
        rc = 130;
    }

out:
    close_line(&u);
    vd_exec_destroy(&ex);
    if (have_plan) vd_plan_free(&plan);
    if (have_prof) vd_profile_free(&prof);
    if (be) be->destroy(be);
    vd_data_close(&ds);
    vd_net_free(&net);
    if (rc && rc != 130) return vd_cli_fail(PROG, &e);
    return rc;
}
