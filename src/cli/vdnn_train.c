/* vdnn-train — train a network from a NET.yaml spec within a device memory
 * budget. Flags override the spec's train: section. Progress goes to stderr,
 * the final report to stdout. Exit status: 0, or the VD_E* code of the error
 * (128 + the signal, 130 / 143 / 129, when stopped by SIGINT / SIGTERM /
 * SIGHUP after saving). See man vdnn-train(1). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
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
#include "train/session.h"
#include "train/metrics.h"
#include "train/dp.h"
#include "config/train_job.h"

static const char *const PROG = "vdnn-train";

static void usage(FILE *f) {
    char pol[160], nets[3 * PATH_MAX];
    vd_cli_policies(pol, sizeof pol);
    vd_cli_nets_help(nets, sizeof nets);
    fprintf(f,
"usage: vdnn-train NET.yaml|NAME [options]\n"
"\n"
"Train the network described by NET.yaml (see vdnn-net(5)) inside a device\n"
"memory budget, offloading activations to host memory as the plan decides.\n"
"Options override the spec's train: section. Without --data the net trains on\n"
"synthetic data.\n"
"%s"
"\n"
"Training:\n"
"  --batch N            batch size (with --gpus N: the global batch, split evenly)\n"
"  --gpus N             data parallel: one rank per GPU (devices --device ..\n"
"                       --device + N - 1; cpu backend: N threads), each training\n"
"                       batch / N samples under --budget on its own device;\n"
"                       gradients averaged by NCCL (cpu: an in-process stand-in);\n"
"                       rank 0 saves and logs (--gpus 1: the same path with one\n"
"                       rank; the same bytes as without --gpus)\n"
"  --mpi                data parallel across processes, e.g. machines: each process\n"
"                       that mpirun starts is one rank (cuda: device = its rank\n"
"                       on the node + --device; NCCL bootstrapped over MPI; cpu:\n"
"                       a gather-and-sum over MPI, the bits of --gpus N), each\n"
"                       training batch / N samples; rank 0 saves and logs.\n"
"                       mpirun -np 2 vdnn-train NET.yaml --mpi --batch 512 ...\n"
"                       (not with --gpus; SIGINT/SIGTERM end the job unsaved)\n"
"  --iters N            total iterations (a resumed run continues up to N;\n"
"                       0: only evaluate, e.g. the weights of --init)\n"
"  --epochs N           iterations = N * ceil(train images / batch) (if no --iters)\n"
"  --stop-at N          stop after iteration N (the LR schedule still spans --iters;\n"
"                       with --save, resume later to finish the run)\n"
"  --optimizer O        sgd | adamw (torch.optim.SGD / AdamW; default: the spec's\n"
"                       train.optimizer, else sgd)\n"
"  --lr F               base learning rate (the spec's lr_policy applies to it;\n"
"                       default: the spec's, else sgd 0.01, adamw 0.001)\n"
"  --momentum F         SGD's momentum\n"
"  --nesterov           SGD: Nesterov momentum (needs momentum > 0)\n"
"  --betas B1,B2        AdamW's betas, each in [0, 1) (default 0.9,0.999)\n"
"  --eps F              AdamW's eps, positive (default 1e-8)\n"
"  --wd F               weight decay (alias --weight-decay; default: the spec's,\n"
"                       else sgd 0.0005, adamw 0.01: AdamW's is decoupled)\n"
"  --seed N             seed for initialisation, data order and dropout\n"
"  --data SPEC          mnist:DIR | cifar10:DIR | folder:DIR | synthetic[:TRAIN[,TEST]]\n"
"  --augment            folder data: random resized crops + flips (torchvision's\n"
"                       RandomResizedCrop, scale 0.08-1, ratio 3/4-4/3)\n"
"  --val-split F        folder data without val/: hold out the fraction F of the\n"
"                       training images (chosen by --seed) for evaluation\n"
"  --loader-threads N   data loader threads (default: the cores, at most 16;\n"
"                       vdnn-loader-bench measures the rate per thread count)\n"
"\n"
"Checkpoints (safetensors; FILE loads into torchvision, FILE.state holds the rest):\n"
"  --save FILE          write a checkpoint at the end (and on SIGINT,\n"
"                       SIGTERM, SIGHUP, or a data error later in the run)\n"
"  --save-every N       also write it every N iterations\n"
"  --keep K             with --save-every: write those to numbered files FILE-ITER\n"
"                       (lenet.safetensors -> lenet-500.safetensors, + .state),\n"
"                       keeping the K newest this run wrote (older ones removed)\n"
"  --save-best          after each evaluation with a higher test accuracy (top-1)\n"
"                       than every earlier one: write FILE-best (+ .state)\n"
"  --early-stop N       end the run (saving as at its end) after N evaluations in\n"
"                       a row without a higher test accuracy (needs --eval-every)\n"
"  --save-dtype T       f32 | bf16: dtype of FILE's weights (default f32; bf16 is\n"
"                       rounded to nearest even, FILE.state's optimizer state stays\n"
"                       f32)\n"
"  --resume FILE        continue exactly: weights, optimizer state, iteration, data\n"
"                       position (without --data: the data FILE was trained on;\n"
"                       the optimizer must be FILE's)\n"
"  --init FILE          start from FILE's weights only (says on stderr what it\n"
"                       loaded; --init and --resume read F32, BF16 and F16)\n"
"  --init-skip PATTERN  with --init: the tensors whose names match (POSIX extended\n"
"                       regex, searched: '^fc\\.') stay at their initialisation\n"
"                       (a new head), and FILE's are not read\n"
"\n"
"Fine-tuning:\n"
"  --freeze PATTERN     the parameters whose names match get no gradient and no\n"
"                       update ('^(conv1|bn1|layer[1-3])\\.'); batch-norm running\n"
"                       statistics still update (a layer's own learning rate:\n"
"                       lr_mult in the spec, vdnn-net(5))\n"
"\n"
"Memory plan (the same options and defaults as vdnn-plan; see vdnn-plan(1)):\n"
"  --budget SIZE        device memory pool, e.g. 12G, 512M (default: what the plan\n"
"                       needs, within what the device can give = free memory\n"
"                       after setup - 512 MiB)\n"
"  --policy P           %s (default: auto =\n                       none when the net fits, else the fastest plan)\n"
"  --prefetch P         auto | paper (when prefetches are issued; default auto)\n"
"  --chunks K|L=K,...   split layers into K batch chunks: every layer that can be,\n"
"                       or the named ones (a run of them shares its chunks);\n"
"                       less memory per step (default: none split)\n"
"  --profile FILE       plan with this profile (JSON, see vdnn-plan(1)) instead of\n"
"                       measuring one (cuda measures each layer's algorithms and\n"
"                       the copy bandwidths before planning)\n"
"  --analytic-profile   plan with the analytic profile (no measuring pass)\n"
"  --profile-out FILE   write the profile used to FILE\n"
"  --plan-json FILE     write the plan that runs as JSON (vdnn-plan --format json)\n"
"  --poison             NaN-fill freed device memory (debugging)\n"
"\n"
"Backend:\n"
"%s"
"\n"
"Reporting:\n"
"  --eval-every N       evaluate on the held-out split every N iterations (and at\n"
"                       the end; 0 = only at the end, -1 = never)\n"
"  --log-every N        progress every N iterations (default: about 20 reports)\n"
"  --quiet              no progress on stderr; only the final report\n"
"  --metrics FILE       one JSON line per progress report and per evaluation\n"
"                       (iteration, epoch, loss, avg, training accuracy, lr,\n"
"                       images/s, top-1 and top-5 accuracy, elapsed time),\n"
"                       flushed as written\n"
"  --step-times         after training, the last iteration's steps measured on the\n"
"                       compute stream beside the simulator's prediction, and\n"
"                       its copies (start, end, GB/s) beside the simulator's\n"
"  --step-times-out FILE\n"
"                       --step-times, and every step of that iteration to FILE\n"
"                       (tab-separated: measured and predicted ms, copies beside)\n"
"  --mem-trace          CUDA: synchronize after every step and list the steps\n"
"                       after which the process's device memory grew (slow)\n"
"  --graph G            auto | on | off: capture the training iteration once and\n"
"                       replay it (a CUDA graph); auto (default) where the plan\n"
"                       offloads nothing; off issues every op\n"
"  --help               this text\n"
"  --version            version and build features\n"
VD_CLI_LIST_NETS_HELP
"\n"
"Exit status: 0 ok, 2 usage, 3 spec, 4 io, 5 data, 6 budget, 7 device,\n"
"8 unsupported, 9 nomem, 10 numeric (loss NaN/Inf), 130 / 143 / 129 stopped by\n"
"SIGINT / SIGTERM / SIGHUP (after saving).\n", nets, pol,
        VD_CLI_BACKEND_HELP);
}

/* ---- options ------------------------------------------------------------- */

typedef struct opts {
    vd_cli_common c;            /* NET.yaml and the run setup (shared with vdnn-bench) */
    vd_train_job_opts job;      /* the rest (config/train_job.h) */
    bool has_save_dtype;
} opts;

static const vd_cli_flag FLAGS[] = {
    {"batch", true}, {"gpus", true}, {"mpi", false}, {"iters", true}, {"epochs", true}, {"stop-at", true}, {"lr", true}, {"momentum", true},
    {"optimizer", true}, {"nesterov", false}, {"betas", true}, {"eps", true},
    {"wd", true}, {"weight-decay", true}, {"seed", true}, {"data", true}, {"augment", false},
    {"val-split", true},
    {"loader-threads", true}, {"save", true}, {"save-every", true}, {"keep", true},
    {"save-best", false}, {"early-stop", true}, {"save-dtype", true}, {"resume", true},
    {"init", true}, {"init-skip", true}, {"freeze", true}, {"backend", true},
    {"device", true}, {"budget", true}, {"policy", true},
    {"prefetch", true}, {"chunks", true}, {"profile", true}, {"profile-out", true}, {"analytic-profile", false},
    {"math", true}, {"plan-json", true}, {"no-stage-input", false}, {"conv-tune", true},
    {"conv-api", true}, {"conv-split", true}, {"conv-topk", true}, {"conv-rtc", false},
    {"conv-debug", true}, {"no-fuse", false}, {"sync-debug", false}, {"step-times", false}, {"step-times-out", true},
    {"mem-trace", false},
    {"graph", true},
    {"deterministic", false}, {"poison", false}, {"eval-every", true}, {"log-every", true},
    {"quiet", false}, {"help", false}, {"version", false}, {"metrics", true},
    {"list-nets", false},
};

/* vdnn-train's own flags (vd_cli_tool_flag; ctx is the opts). */
static int train_flag(void *ctx, const char *name, const char *val, vd_err *e) {
    opts *o = ctx;
    vd_train_job_opts *j = &o->job;
    const int64_t BIG = VD_CKPT_MAX_ITERATION;
    int64_t threads;
    int rc = VD_OK;
    if (!strcmp(name, "iters")) { rc = vd_cli_int(name, val, 0, BIG, &j->iters, e); j->has_iters = true; }
    else if (!strcmp(name, "epochs")) { rc = vd_cli_int(name, val, 1, 1 << 30, &j->epochs, e); j->has_epochs = true; }
    else if (!strcmp(name, "stop-at")) rc = vd_cli_int(name, val, 1, BIG, &j->stop_at, e);
    else if (!strcmp(name, "save-every")) rc = vd_cli_int(name, val, 0, BIG, &j->save_every, e);
    else if (!strcmp(name, "keep")) {
        rc = vd_cli_int(name, val, 0, BIG, &j->keep, e);
        if (!rc && j->keep == 0)
            rc = vd_errf(e, VD_EUSAGE, "--keep 0 would remove every numbered checkpoint as soon "
                         "as it is written; give K >= 1, or leave --keep out (then --save-every "
                         "replaces FILE)");
    }
    else if (!strcmp(name, "early-stop")) {
        rc = vd_cli_int(name, val, 0, BIG, &j->early_stop, e);
        if (!rc && j->early_stop == 0)
            rc = vd_errf(e, VD_EUSAGE, "--early-stop 0 would stop before any evaluation; give "
                         "N >= 1 evaluations without improvement, or leave it out");
    }
    else if (!strcmp(name, "save-best")) j->save_best = true;
    else if (!strcmp(name, "eval-every")) { rc = vd_cli_int(name, val, -1, BIG, &j->eval_every, e); j->has_eval_every = true; }
    else if (!strcmp(name, "log-every")) { rc = vd_cli_int(name, val, 1, BIG, &j->log_every, e); j->has_log_every = true; }
    else if (!strcmp(name, "loader-threads")) {
        rc = vd_cli_int(name, val, 1, 256, &threads, e);
        j->loader_threads = (int)threads;
    }
    /* the ranges of the spec's train: keys (vdnn-net(5)) */
    else if (!strcmp(name, "lr")) {
        rc = vd_cli_real(name, val, 0, &j->lr, e);
        if (!rc && !(j->lr > 0 && j->lr <= 1e30))
            rc = vd_errf(e, VD_EUSAGE, "--lr: '%s' must be positive (at most 1e30)", val);
        j->has_lr = true;
    } else if (!strcmp(name, "momentum")) {
        rc = vd_cli_real(name, val, 0, &j->momentum, e);
        if (!rc && !(j->momentum < 1))
            rc = vd_errf(e, VD_EUSAGE, "--momentum: '%s' must be in [0, 1)", val);
        j->has_momentum = true;
    } else if (!strcmp(name, "nesterov")) {
        j->nesterov = true;
    } else if (!strcmp(name, "betas")) {
        /* B1,B2: each in [0, 1), as torch.optim.AdamW checks them */
        const char *comma = strchr(val, ',');
        char b1[64];
        snprintf(b1, sizeof b1, "%.*s", comma ? (int)(comma - val) : 0, val);
        if (!comma || comma - val >= (long)sizeof b1 || vd_parse_f64(b1, &j->beta1, NULL) ||
            vd_parse_f64(comma + 1, &j->beta2, NULL) || !(j->beta1 >= 0 && j->beta1 < 1) ||
            !(j->beta2 >= 0 && j->beta2 < 1))
            rc = vd_errf(e, VD_EUSAGE, "--betas: '%s' is not two numbers in [0, 1), e.g. "
                         "--betas 0.9,0.999", val);
        j->has_betas = true;
    } else if (!strcmp(name, "eps")) {
        rc = vd_cli_real(name, val, 0, &j->eps, e);
        if (!rc && !(j->eps > 0 && j->eps <= 1e30))
            rc = vd_errf(e, VD_EUSAGE, "--eps: '%s' must be positive (at most 1e30)", val);
        j->has_eps = true;
    } else if (!strcmp(name, "wd") || !strcmp(name, "weight-decay")) {
        rc = vd_cli_real(name, val, 0, &j->wd, e);
        if (!rc && !(j->wd <= 1e30))
            rc = vd_errf(e, VD_EUSAGE, "--%s: '%s' must be non-negative (at most 1e30)", name, val);
        j->has_wd = true;
    }
    else if (!strcmp(name, "data")) j->data = val;
    else if (!strcmp(name, "val-split")) {
        rc = vd_cli_real(name, val, 0, &j->val_split, e);
        if (!rc && !(j->val_split > 0 && j->val_split < 1))
            rc = vd_errf(e, VD_EUSAGE, "--val-split: '%s' must be a fraction between 0 and 1 "
                         "(exclusive), e.g. 0.1", val);
    }
    else if (!strcmp(name, "save")) j->save = val;
    else if (!strcmp(name, "save-dtype")) {
        static const char *const ch[] = { "f32", "bf16" };
        rc = vd_cli_choice(name, val, ch, (int)VD_ARRAY_LEN(ch), e);
        if (!rc) j->save_dtype = !strcmp(val, "bf16") ? VD_CKPT_BF16 : VD_CKPT_F32;
        o->has_save_dtype = true;
    }
    else if (!strcmp(name, "resume")) j->resume = val;
    else if (!strcmp(name, "init")) j->init = val;
    else if (!strcmp(name, "init-skip")) {
        if (j->init_skip)
            rc = vd_errf(e, VD_EUSAGE, "--init-skip given twice ('%s', '%s'): give one pattern, "
                         "alternatives joined with | (e.g. '^(fc|layer4)\\.')", j->init_skip, val);
        j->init_skip = val;
    }
    else if (!strcmp(name, "augment")) j->augment = true;
    else if (!strcmp(name, "poison")) j->poison = true;
    else if (!strcmp(name, "mpi")) j->mpi = true;
    else if (!strcmp(name, "plan-json")) j->plan_json = val;
    else if (!strcmp(name, "step-times-out")) {   /* (implies --step-times) */
        j->step_times_out = val;
        o->c.cfg.step_times = true;
    }
    else if (!strcmp(name, "metrics")) j->metrics = val;
    return rc;
}

/* Returns VD_OK, an error, or -1 for --help / --version (already printed). */
static int parse_args(int argc, char **argv, opts *o, vd_err *e) {
    memset(o, 0, sizeof *o);
    vd_train_job_opts *j = &o->job;
    int rc = vd_cli_parse(argc, argv, PROG, usage, FLAGS, (int)VD_ARRAY_LEN(FLAGS), &o->c,
                          train_flag, o, e);
    if (rc) return rc;
    j->spec = o->c.spec;
    j->cfg = o->c.cfg;
    j->has_seed = o->c.has_seed;
    j->seed = (uint64_t)o->c.seed;
    if (j->resume && j->init)
        return vd_errf(e, VD_EUSAGE, "--resume and --init exclude each other");
    if (j->init_skip && !j->init)
        return vd_errf(e, VD_EUSAGE, "--init-skip needs --init FILE");
    if (j->init_skip) {   /* a bad pattern fails now, not after profiling and planning */
        regex_t re;
        if ((rc = vd_regex_compile(&re, j->init_skip, "--init-skip", e))) return rc;
        regfree(&re);
    }
    if (j->save_every && !j->save)
        return vd_errf(e, VD_EUSAGE, "--save-every needs --save FILE");
    if (j->keep && !j->save_every)
        return vd_errf(e, VD_EUSAGE, "--keep needs --save-every N (and --save FILE): it keeps the "
                       "newest of the numbered checkpoints written every N iterations");
    if (j->save_best && !j->save)
        return vd_errf(e, VD_EUSAGE, "--save-best needs --save FILE (the best checkpoint is "
                       "written beside it, as FILE-best)");
    if (j->save_best && j->has_eval_every && j->eval_every < 0)
        return vd_errf(e, VD_EUSAGE, "--save-best needs evaluations, and --eval-every -1 turns "
                       "them off");
    if (j->early_stop && !(j->has_eval_every && j->eval_every > 0))
        return vd_errf(e, VD_EUSAGE, "--early-stop needs evaluation during the run: give "
                       "--eval-every N (without it the only evaluation is the one at the end)");
    if (o->has_save_dtype && !j->save)
        return vd_errf(e, VD_EUSAGE, "--save-dtype needs --save FILE");
    if (j->mpi && j->cfg.gpus)
        return vd_errf(e, VD_EUSAGE, "--mpi and --gpus exclude each other: under --mpi each "
                       "process that mpirun starts is one rank (mpirun -np N ... --mpi)");
    if (j->has_iters && j->has_epochs)
        return vd_errf(e, VD_EUSAGE, "--iters and --epochs exclude each other (give one: the "
                       "number of iterations, or of epochs)");
    return VD_OK;
}

/* ---- progress ------------------------------------------------------------- */

typedef struct ui {
    bool quiet, tty;
    bool line_open;             /* a \r progress line is on screen */
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
    if (ev->kind == VD_TEV_WARNING) {
        close_line(u);
        fprintf(stderr, "%s: warning: %s\n", PROG, ev->msg);
        return;
    }
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
        /* avg, acc: over the iterations since the last line; img/s end to end;
         * per iteration: the step (compute) and the wait for data */
        fprintf(stderr, "epoch %lld/%lld  iter %lld/%lld  loss %.4f  avg %.4f  acc %.2f%%  "
                "lr %.4g  %.1f img/s  step %.1f ms  data wait %.1f ms  ETA %s",
                (long long)ev->epoch, (long long)ev->epochs, (long long)ev->iter,
                (long long)ev->total, (double)ev->loss, ev->avg_loss, 100.0 * ev->train_acc,
                ev->lr, ev->img_per_s, 1e3 * ev->win.step_per_iter_s,
                1e3 * ev->win.wait_per_iter_s, eta);
        if (ev->loss_scaled)   /* math fp16 */
            fprintf(stderr, "  scale %g  skipped %lld", ev->loss_scale, (long long)ev->skipped);
        if (u->tty && !ev->final) u->line_open = true;
        else { fputc('\n', stderr); u->line_open = false; }
        break;
    case VD_TEV_EVAL:
        close_line(u);
        fprintf(stderr, "eval  iter %lld  accuracy %.2f%%  top-5 %.2f%%  loss %.4f  (%lld "
                "images)\n", (long long)ev->iter, 100.0 * ev->eval_acc, 100.0 * ev->eval_acc5,
                ev->eval_loss, (long long)ev->eval_n);
        break;
    case VD_TEV_SAVE:
        close_line(u);
        fprintf(stderr, "saved %s (+ .state) at iteration %lld\n", ev->path, (long long)ev->iter);
        break;
    case VD_TEV_NOTE:
        close_line(u);
        fprintf(stderr, "%s: %s\n", PROG, ev->msg);
        break;
    case VD_TEV_WARNING:   /* above */
        break;
    }
    fflush(stderr);
}

/* --step-times: the last training iteration's steps, measured on the
 * compute stream (duration = end - previous end, stalls included) beside the
 * simulator's, the VD_STEP_TIMES_ROWS steps measured furthest over their
 * prediction first, then the VD_STEP_TIMES_UNDER steps furthest under it,
 * then the totals. Where an iteration is slower (or faster) than predicted,
 * this says at which steps. */
enum { VD_STEP_TIMES_ROWS = 15, VD_STEP_TIMES_UNDER = 8 };

/* One row of report_step_times: step s, measured dur, predicted pdur (ms). */
static void step_time_row(const vd_plan *plan, const vd_net *net, int s, const double *dur,
                          const double *pdur, const double *end) {
    char nm[VD_NAME_MAX + 64];
    printf("  %-5d %-28.28s %10.3f %10.3f %+9.3f %10.3f %10.3f\n", s,
           vd_plan_step_label(plan, net, s, nm, sizeof nm), dur[s], pdur[s], dur[s] - pdur[s],
           end[s], 1e3 * plan->steps[s].t_end);
}
/* The measured time of copies in direction h2d within [a, b] (ms). */
static double copies_within(const vd_exec_copy_time *ct, int nc, bool h2d, double a, double b) {
    double sum = 0;
    for (int i = 0; i < nc; i++) {
        if (ct[i].h2d != h2d) continue;
        double lo = ct[i].start_ms > a ? ct[i].start_ms : a, hi = ct[i].end_ms < b ? ct[i].end_ms : b;
        if (hi > lo) sum += hi - lo;
    }
    return sum;
}

/* The copies measured beside each step s (beside[s]: 0 none, 1 D2H, 2 H2D,
 * 3 both; a direction counts where its copies ran through at least half of
 * the step), for report_step_times' groups and --step-times-out. */
static const char *const BESIDE[4] = {"no copy", "D2H", "H2D", "D2H and H2D"};
static void steps_beside_copies(const vd_exec *ex, int n, const double *end, const double *dur,
                                int *beside) {
    const vd_exec_copy_time *ct = NULL;
    int nc = vd_exec_copy_times(ex, &ct);
    for (int s = 0; s < n; s++) {
        double a = s ? end[s - 1] : 0.0, b = end[s];
        bool d = nc > 0 && copies_within(ct, nc, false, a, b) >= 0.5 * dur[s];
        bool h = nc > 0 && copies_within(ct, nc, true, a, b) >= 0.5 * dur[s];
        beside[s] = (d ? 1 : 0) + (h ? 2 : 0);
    }
}

/* report_step_times' last rows: the steps grouped by the copies beside them
 * (steps_beside_copies), each group's measured and predicted time: how much
 * copies slow the compute beside them, against what the simulator charges
 * for it (dev.compute_slow_*). Nothing where the iteration made no copy. */
static void report_steps_beside_copies(const vd_exec *ex, int n, const int *beside,
                                       const double *dur, const double *pdur) {
    const vd_exec_copy_time *ct = NULL;
    if (vd_exec_copy_times(ex, &ct) <= 0) return;
    int cnt[4] = {0};
    double meas[4] = {0}, pred[4] = {0};
    for (int s = 0; s < n; s++) {
        cnt[beside[s]]++;
        meas[beside[s]] += dur[s];
        pred[beside[s]] += pdur[s];
    }
    for (int g = 0; g < 4; g++)
        if (cnt[g])
            printf("  %d steps beside %s: measured %.3f ms, predicted %.3f ms (%+.1f%%)\n",
                   cnt[g], BESIDE[g], meas[g], pred[g],
                   pred[g] > 0 ? 100.0 * (meas[g] / pred[g] - 1.0) : 0.0);
}

/* --step-times-out FILE: every step of the last iteration, a row of
 * tab-separated values each: the report's columns and the copies beside it. */
typedef struct step_rows {
    const vd_plan *plan;
    const vd_net *net;
    int n;
    const double *end, *dur, *pdur;
    const int *beside;
} step_rows;
static int write_step_rows(FILE *f, const void *ctx, vd_err *e) {
    (void)e;
    const step_rows *r = ctx;
    fprintf(f, "step\top\tmeasured_ms\tpredicted_ms\tend_ms\tpredicted_end_ms\tbeside\n");
    for (int s = 0; s < r->n; s++) {
        char nm[VD_NAME_MAX + 64];
        fprintf(f, "%d\t%s\t%.4f\t%.4f\t%.4f\t%.4f\t%s\n", s,
                vd_plan_step_label(r->plan, r->net, s, nm, sizeof nm), r->dur[s], r->pdur[s],
                r->end[s], 1e3 * r->plan->steps[s].t_end, BESIDE[r->beside[s]]);
    }
    return VD_OK;
}

static int report_step_times(const vd_exec *ex, const vd_plan *plan, const vd_net *net,
                             const char *out, vd_err *e) {
    const double *end = NULL;
    int n = vd_exec_step_times(ex, &end);
    if (n <= 0) return VD_OK;
    double *dur = vd_malloc(2 * (size_t)n * sizeof *dur, e);   /* measured, then predicted */
    bool *shown = vd_calloc((size_t)n, sizeof *shown, e);
    int *beside = vd_malloc((size_t)n * sizeof *beside, e);
    if (!dur || !shown || !beside) {
        vd_free(dur);
        vd_free(shown);
        vd_free(beside);
        return VD_ENOMEM;
    }
    double *pdur = dur + n;
    for (int s = 0; s < n; s++) {
        dur[s] = end[s] - (s ? end[s - 1] : 0.0);
        pdur[s] = 1e3 * (plan->steps[s].t_end - (s ? plan->steps[s - 1].t_end : 0.0));
    }
    steps_beside_copies(ex, n, end, dur, beside);
    int rows = n < VD_STEP_TIMES_ROWS ? n : VD_STEP_TIMES_ROWS;
    printf("step times (last iteration, compute stream; ms): the %d steps furthest over the "
           "prediction\n  %-5s %-28s %10s %10s %9s %10s %10s\n", rows, "step", "op", "measured",
           "predicted", "over", "ends at", "predicted");
    for (int r = 0; r < rows; r++) {
        int s = -1;
        for (int t = 0; t < n; t++)
            if (!shown[t] && (s < 0 || dur[t] - pdur[t] > dur[s] - pdur[s])) s = t;
        shown[s] = true;
        step_time_row(plan, net, s, dur, pdur, end);
    }
    int under = n - rows < VD_STEP_TIMES_UNDER ? n - rows : VD_STEP_TIMES_UNDER;
    if (under > 0) printf("  the %d steps furthest under it:\n", under);
    for (int r = 0; r < under; r++) {
        int s = -1;
        for (int t = 0; t < n; t++)
            if (!shown[t] && (s < 0 || dur[t] - pdur[t] < dur[s] - pdur[s])) s = t;
        shown[s] = true;
        step_time_row(plan, net, s, dur, pdur, end);
    }
    printf("  all %d steps: measured %.3f ms, predicted %.3f ms (compute stream; the loss "
           "readback follows)\n", n, end[n - 1], 1e3 * plan->steps[n - 1].t_end);
    report_steps_beside_copies(ex, n, beside, dur, pdur);
    int rc = VD_OK;
    if (out) {
        step_rows r = { plan, net, n, end, dur, pdur, beside };
        if ((rc = vd_write_stream_atomic(out, write_step_rows, &r, e)))
            vd_err_prefix(e, "--step-times-out");
    }
    vd_free(dur);
    vd_free(shown);
    vd_free(beside);
    return rc;
}

/* --step-times, the copies of that iteration beside the simulator's: per
 * direction the count, bytes, the stream's busy time and the rate that
 * makes (against the profile's one-way rates beside compute, which the
 * simulator times copies at, and alone), then the
 * VD_COPY_TIMES_ROWS copies that end furthest after their prediction. A
 * copy that runs slower than the profile says delays whatever waits for
 * it: an offload ending late stalls the step that reuses its region, a
 * prefetch the step that reads it. */
enum { VD_COPY_TIMES_ROWS = 8 };
static void report_copy_times(const vd_exec *ex, const vd_plan *plan, const vd_device_params *dev) {
    const vd_exec_copy_time *ct = NULL;
    int n = vd_exec_copy_times(ex, &ct);
    if (n <= 0) return;
    bool *shown = vd_calloc((size_t)n, sizeof *shown, NULL);
    if (!shown) { fprintf(stderr, "%s: copy times: out of memory\n", PROG); return; }
    printf("copies (last iteration; ms from its start, from when the stream began each to "
           "its end)\n");
    for (int d = 0; d < 2; d++) {
        int cnt = 0;
        double bytes = 0, busy = 0;
        for (int i = 0; i < n; i++) {
            if (ct[i].h2d != (d == 1)) continue;
            cnt++;
            bytes += (double)plan->tensors[ct[i].tensor].bytes;
            busy += ct[i].end_ms - ct[i].start_ms;
        }
        if (!cnt) continue;
        char b[32];
        vd_copy_dir dir = d ? VD_COPY_H2D : VD_COPY_D2H;
        printf("  %s: %d cop%s, %s, busy %.3f ms: %.1f GB/s (profile %.1f GB/s one way beside "
               "compute, %.1f alone; %.1f both ways together)\n", d ? "H2D" : "D2H", cnt,
               cnt == 1 ? "y" : "ies", vd_fmt_bytes((uint64_t)bytes, b, sizeof b), busy,
               busy > 0 ? bytes / (busy * 1e-3) / 1e9 : 0.0, vd_device_busy_bw(dev, dir) / 1e9,
               (d ? dev->h2d_bw : dev->d2h_bw) / 1e9, vd_device_busy_bw(dev, VD_COPY_BOTH) / 1e9);
    }
    int rows = n < VD_COPY_TIMES_ROWS ? n : VD_COPY_TIMES_ROWS;
    printf("  the %d copies ending furthest after the prediction:\n  %-4s %-24s %10s %10s %10s "
           "%10s %10s %8s\n", rows, "dir", "tensor", "bytes", "start", "predicted", "end",
           "predicted", "GB/s");
    for (int r = 0; r < rows; r++) {
        int best = -1;
        double late_best = 0;
        for (int i = 0; i < n; i++) {
            if (shown[i]) continue;
            const vd_exec_copy_time *c = &ct[i];
            double pend = c->h2d ? plan->intervals[c->interval].t_h2d_end
                                 : plan->tensors[c->tensor].t_d2h_end;
            double late = c->end_ms - 1e3 * pend;
            if (best < 0 || late > late_best) { best = i; late_best = late; }
        }
        shown[best] = true;
        const vd_exec_copy_time *c = &ct[best];
        const vd_tensor *T = &plan->tensors[c->tensor];
        double ps = c->h2d ? plan->intervals[c->interval].t_h2d_start : T->t_d2h_start;
        double pe = c->h2d ? plan->intervals[c->interval].t_h2d_end : T->t_d2h_end;
        double dur = c->end_ms - c->start_ms;
        char b[32];
        printf("  %-4s %-24.24s %10s %10.3f %10.3f %10.3f %10.3f %8.1f\n", c->h2d ? "H2D" : "D2H",
               T->name, vd_fmt_bytes(T->bytes, b, sizeof b), c->start_ms, 1e3 * ps, c->end_ms,
               1e3 * pe, dur > 0 ? (double)T->bytes / (dur * 1e-3) / 1e9 : 0.0);
    }
    vd_free(shown);
}

/* CUDA: the process's device memory as the driver sees it, beside the
 * budget, and whether it stayed within budget + what lives outside the pool
 * (context, handles, the layers' setup, the pinned host buffers), then where
 * the usage grew: the samples taken before the pool, and the growth beyond
 * the pool when it was created and during the iterations. Prints nothing on
 * cpu. */
static void report_device_memory(vd_session *ses, const vd_plan *plan, const vd_exec_stats *st,
                                 bool trained) {
    vd_session_mem_report r;
    vd_session_mem_check(ses, plan->budget, &r);
    if (!r.known) return;
    const vd_session_memory *m = &ses->mem;
    char a[32], b[32], c[32], d[32], f[32], g[32];
    printf("device memory (driver): process peak %s, at end %s (%d samples), device %s\n",
           vd_fmt_bytes(r.used_max, a, sizeof a), vd_fmt_bytes(r.used_end, b, sizeof b),
           r.n_samples, vd_fmt_bytes(m->total, c, sizeof c));
    printf("device memory: budget %s (pool high-water %s, live peak %s%s) + outside the pool %s",
           vd_fmt_bytes(r.budget, a, sizeof a),
           vd_fmt_bytes(trained ? st->pool_hwm : st->eval_pool_hwm, b, sizeof b),
           vd_fmt_bytes(trained ? st->live_peak : st->eval_live_peak, c, sizeof c),
           trained ? "" : ", evaluation", vd_fmt_bytes(r.overhead, d, sizeof d));
    if (r.pool_tables) printf(" + the pool's page tables %s", vd_fmt_bytes(r.pool_tables, a, sizeof a));
    if (r.first_use) printf(" + kernel code loaded at first use %s", vd_fmt_bytes(r.first_use, a, sizeof a));
    if (r.graph_bytes) printf(" + the captured iterations' graphs %s", vd_fmt_bytes(r.graph_bytes, a, sizeof a));
    printf(" = %s: %s", vd_fmt_bytes(r.limit, f, sizeof f), r.within ? "within\n" : "EXCEEDED by ");
    if (!r.within) printf("%s\n", vd_fmt_bytes(r.excess, g, sizeof g));
    /* The samples before the pool (each includes the previous). Pinning host
     * memory costs device memory too (the driver's mappings, about 2 MiB per
     * GiB pinned), so the pinned host buffers are allocated before the pool
     * and counted outside it. */
    printf("outside the pool: CUDA context + cuDNN/cuBLAS handles %s, after layer setup and "
           "profiling %s", vd_fmt_bytes(m->used_backend, a, sizeof a),
           vd_fmt_bytes(m->used_setup, b, sizeof b));
    if (m->used_pinned)
        printf(",\n  after the pinned host buffers (host store %s) %s",
               vd_fmt_bytes(st->host_store_bytes, a, sizeof a),
               vd_fmt_bytes(m->used_pinned, b, sizeof b));
    printf("\n");
    if (m->used_created) {
        /* Growth beyond the pool (rounded up to the allocation granularity)
         * when it was created (the driver's page tables for it), during the
         * first training / evaluation pass (kernel code CUDA loads at first
         * launch, when loading is lazy), in the passes that captured a graph
         * (its executable) and else (none expected). */
        uint64_t base = m->used_created + m->first_use + m->graph_bytes;
        uint64_t later = r.used_max > base ? r.used_max - base : 0;
        printf("growth beyond the pool: at its creation %s; ", vd_fmt_bytes(m->pool_growth, a, sizeof a));
        if (m->graph_bytes)
            printf("capturing the iteration's graphs %s; ", vd_fmt_bytes(m->graph_bytes, d, sizeof d));
        if (m->lazy_loading)
            printf("in the first passes %s (kernel code loaded at first use: CUDA lazy loading); "
                   "after them %s\n", vd_fmt_bytes(m->first_use, b, sizeof b),
                   vd_fmt_bytes(later, c, sizeof c));
        else
            printf("during the iterations %s (CUDA_MODULE_LOADING=EAGER)\n",
                   vd_fmt_bytes(later, b, sizeof b));
    }
    if (ses->mem_trace) {
        /* --mem-trace: the steps after which the process grew */
        printf("memory trace: %d step%s grew the process's device memory%s\n", m->n_growth,
               m->n_growth == 1 ? "" : "s", m->n_growth ? ":" : "");
        for (int i = 0; i < m->n_growth && i < VD_SESSION_MAX_GROWTH; i++) {
            const struct vd_session_growth *gr = &m->growth[i];
            const vd_plan *p = gr->eval ? plan->eval : plan;
            const char *what = gr->eval ? "end of the evaluation pass" : "SGD update";
            char nm[160];
            if (gr->step < p->n_steps && p->steps[gr->step].layer >= 0) {
                const vd_step *st2 = &p->steps[gr->step];
                snprintf(nm, sizeof nm, "%s %s", st2->kind == VD_STEP_BWD ? "bwd" : "fwd",
                         ses->net->layers[st2->layer].name);
                what = nm;
            }
            printf("  %s pass %lld, step %d (%s): +%s, process %s%s\n",
                   gr->eval ? "evaluation" : "training", (long long)gr->pass, gr->step, what,
                   vd_fmt_bytes(gr->bytes, a, sizeof a), vd_fmt_bytes(gr->used, b, sizeof b),
                   gr->pass == 0 && m->lazy_loading ? " (first pass: counted as kernel code "
                   "loaded at first use)" : "");
        }
    }
    if (!r.within)
        fprintf(stderr, "%s: warning: the process used %s of device memory, %s more than the "
                "budget plus what lives outside the pool (on a shared GPU other processes count "
                "too)\n", PROG, vd_fmt_bytes(r.used_max, a, sizeof a),
                vd_fmt_bytes(r.excess, b, sizeof b));
}

/* The host memory the allocation wrappers and the pinned host buffers
 * counted (util.h): the high-water mark, beside the device figures. */
static void report_host_memory(void) {
    vd_mem_stats ms;
    vd_mem_stats_get(&ms);
    char a[32], b[32];
    printf("host memory: high-water %s (allocation wrappers + pinned host buffers), "
           "pinned now %s\n", vd_fmt_bytes(ms.peak, a, sizeof a),
           vd_fmt_bytes(ms.tracked, b, sizeof b));
}

/* ---- the run's header and report ------------------------------------------ */

static void on_planning(vd_plan_opts *po, void *ctx) {
    const ui *u = ctx;
    vd_cli_plan_progress(po, PROG, u->quiet);
}

/* The job is set up: what it will train, how, and with which plan. */
static void on_ready(const vd_train_job *j, void *ctx) {
    const ui *u = ctx;
    const vd_plan *plan = &j->plan;
    const vd_train_cfg *tc = &j->net.train;
    const vd_config_run *run = &j->run;
    vd_cli_warn_auto_cpu(PROG, &j->ses, plan->sim.iter_s, j->iters);
    if (u->quiet) return;
    char b1[32], b2[32], b3[32], capmsg[96];
    fprintf(stderr, "%s: net %s (%lld parameters), batch %d, %lld iterations "
            "(%.2f epochs of %s)\n", PROG, j->net.name, (long long)j->net.n_trainable, tc->batch,
            (long long)j->iters, (double)j->iters * tc->batch /
            (double)j->data_info->n[VD_SPLIT_TRAIN], j->data_info->desc);
    vd_freeze_count fc;
    vd_net_frozen_count(&j->net, &fc);
    if (fc.frozen)
        fprintf(stderr, "%s: --freeze: %d of %d parameter tensors frozen (%lld parameters); "
                "the backward pass skips %d layers\n", PROG, fc.frozen, fc.params,
                (long long)fc.frozen_numel, fc.no_grad_layers);
    char optim[96];
    if (tc->optimizer == VD_OPT_ADAMW)
        snprintf(optim, sizeof optim, "adamw (betas %g, %g, eps %g)", (double)tc->beta1,
                 (double)tc->beta2, (double)tc->eps);
    else
        snprintf(optim, sizeof optim, "sgd (momentum %g%s)", (double)tc->momentum,
                 tc->nesterov ? ", nesterov" : "");
    fprintf(stderr, "%s: optimizer %s, lr %g (%s%s), weight decay %g, seed %llu\n", PROG,
            optim, (double)tc->lr, vd_lr_policy_name(&tc->lr_policy),
            tc->lr_policy.warmup ? " + warmup" : "", (double)tc->weight_decay,
            (unsigned long long)tc->seed);
    snprintf(capmsg, sizeof capmsg, " (default: what the plan needs, within the %s the "
             "device can give)", vd_fmt_bytes(run->plan.budget, b3, sizeof b3));
    fprintf(stderr, "%s: plan: policy %s, budget %s%s, peak %s, offload %s/iter, "
            "predicted %.4f s/iter (%s)\n", PROG, vd_policy_name(plan->policy),
            vd_fmt_bytes(plan->budget, b1, sizeof b1),
            run->budget_given ? "" : j->ses.mem.known ? capmsg : " (default: what the plan needs)",
            vd_fmt_bytes(plan->live_peak, b2, sizeof b2),
            vd_fmt_bytes(plan->offload_bytes, b3, sizeof b3), plan->sim.iter_s,
            j->ses.prof.source);
    if (plan->n_units != plan->n_layers) {
        char sp[VD_NAME_MAX * 2 + 96];
        fprintf(stderr, "%s: plan: split layers: %s\n", PROG,
                vd_plan_split_summary(plan, &j->net, sp, sizeof sp));
    }
    if (run->dp && run->ranks == 1)
        fprintf(stderr, "%s: data parallel: 1 rank (%s all-reduce of every gradient bucket; "
                "the same bytes as without --gpus)\n", PROG, j->dp.ar[0]->name);
    else if (run->dp)
        fprintf(stderr, "%s: data parallel: %d ranks (%s all-reduce), %d samples each; "
                "gradients %s in %d bucket%s, predicted all-reduce %.2f ms (%.2f ms exposed): "
                "%.4f s/iter\n", PROG, run->ranks, j->dp.ar[0]->name, run->batch,
                vd_fmt_bytes(plan->dp.grad_bytes, b1, sizeof b1), plan->dp.n_buckets,
                plan->dp.n_buckets == 1 ? "" : "s", 1e3 * plan->dp.allreduce_s,
                1e3 * plan->dp.exposed_s, plan->dp.ranks > 1 ? plan->dp.iter_s : plan->sim.iter_s);
}

/* The report on stdout after training. */
static int report(vd_train_job *j, const vd_train_job_opts *o, vd_err *e) {
    const vd_train_result *res = &j->res;
    const vd_plan *plan = &j->plan;
    const vd_net *net = &j->net;
    vd_exec_stats st;
    vd_exec_get_stats(j->ex, &st);
    char a[32], b[32], c[32], d[32], f[32];
    bool trained = res->iters_done > res->first_iter;
    if (trained)
        printf("trained %s: iterations %lld..%lld in %.1f s, final loss %.4f\n", net->name,
               (long long)res->first_iter, (long long)res->iters_done, res->train_s,
               (double)res->last_loss);
    else
        printf("%s: no training iterations ran (at iteration %lld)\n", net->name,
               (long long)res->iters_done);
    if (res->loss_scaled)
        printf("loss scaling (fp16): scale %g at the end, %lld steps skipped (inf/NaN "
               "gradients)\n", res->loss_scale, (long long)res->skipped);
    if (res->eval_n)
        printf("test accuracy %.2f%%  top-5 %.2f%%  loss %.4f  (%lld held-out images)\n",
               100.0 * res->eval_acc, 100.0 * res->eval_acc5, res->eval_loss,
               (long long)res->eval_n);
    if (res->early_stopped)
        printf("early stop at iteration %lld of %lld: %lld evaluations in a row without a higher "
               "test accuracy than %.2f%% (iteration %lld)\n", (long long)res->iters_done,
               (long long)j->iters, (long long)res->best.since, 100.0 * res->best.acc,
               (long long)res->best.iter);
    char *best = res->best.known && o->save_best ? vd_ckpt_tagged(o->save, "best", NULL) : NULL;
    if (res->best.known)
        printf("best test accuracy %.2f%% at iteration %lld%s%s\n", 100.0 * res->best.acc,
               (long long)res->best.iter, best ? ", saved as " : "", best ? best : "");
    vd_free(best);
    printf("memory: pool %s, high-water %s, live peak %s%s, host store %s\n",
           vd_fmt_bytes(st.pool_bytes, a, sizeof a),
           vd_fmt_bytes(trained ? st.pool_hwm : st.eval_pool_hwm, b, sizeof b),
           vd_fmt_bytes(trained ? st.live_peak : st.eval_live_peak, c, sizeof c),
           trained ? "" : " (evaluation)", vd_fmt_bytes(st.host_store_bytes, d, sizeof d));
    printf("copies per iteration: offloaded %s, prefetched %s\n",
           vd_fmt_bytes(st.offload_bytes_iter, a, sizeof a),
           vd_fmt_bytes(st.prefetch_bytes_iter, f, sizeof f));
    /* a step is captured once its graph key (the input buffers, whether the
     * batches are made on the device) repeats: member.c, graph_key */
    if (trained && j->ses.graph == VD_GRAPH_AUTO && !vd_exec_graph_asked(j->ses.graph, &j->plan))
        printf("captured iteration: none (--graph auto: a plan that offloads runs eagerly; "
               "--graph on replays it)\n");
    else if (trained)
        printf("captured iteration: %lld of %lld training steps replayed it (%lld captured)\n",
               (long long)(st.graph_launches - st.graph_captures), (long long)st.train_steps,
               (long long)st.graph_captures);
    if (res->timing.iters > 0) {
        const vd_train_timing *tm = &res->timing;
        char threads[64];
        if (res->synth_device)
            snprintf(threads, sizeof threads, "synthetic batches generated on the device");
        else
            snprintf(threads, sizeof threads, "%d loader threads", res->loader_threads);
        printf("end to end: %.1f img/s (%lld iterations in %.2f s wall clock, saves and "
               "evaluations excluded); per iteration: step %.4f s, waiting for data %.4f s "
               "(%.1f%%, %s)\n", tm->img_per_s, (long long)tm->iters, tm->wall_s,
               tm->step_per_iter_s, tm->wait_per_iter_s,
               tm->wall_s > 0 ? 100.0 * tm->wait_s / tm->wall_s : 0.0, threads);
    }
    /* data parallel: the prediction includes the all-reduce (plan.dp) */
    double pred = plan->dp.ranks > 1 ? plan->dp.iter_s : plan->sim.iter_s;
    if (res->mean_iter_s > 0)
        printf("iteration time (compute only, data waits excluded; mean of %lld): measured "
               "%.4f s (%.1f img/s), predicted %.4f s (%s, %+.0f%%)\n", (long long)res->mean_iters,
               res->mean_iter_s, net->train.batch / res->mean_iter_s, pred, j->ses.prof.source,
               pred > 0 ? 100.0 * (res->mean_iter_s - pred) / pred : 0.0);
    if (j->run.dp)
        printf("data parallel: %d rank%s of %d samples (global batch %d), %s all-reduce; the "
               "memory figures are rank 0's\n", j->run.ranks, j->run.ranks == 1 ? "" : "s",
               j->run.batch, net->train.batch, j->dp.ar[0]->name);
    report_device_memory(&j->ses, plan, &st, trained);
    report_host_memory();
    if (!trained) return VD_OK;
    int rc = report_step_times(j->ex, plan, net, o->step_times_out, e);
    report_copy_times(j->ex, plan, &j->ses.prof.dev);
    return rc;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    opts o;
    vd_err e = {0};
    int rc = parse_args(argc, argv, &o, &e);
    if (rc < 0) return 0;
    if (rc) return vd_cli_fail(PROG, &e);
    /* SIGINT, SIGTERM, SIGHUP: every phase stops at its next check; training
     * saves (--save) first. The exit status is then 128 + the signal (130,
     * 143, 129), as if the signal had killed the process. Not under --mpi:
     * the processes would stop at different iterations, some waiting in an
     * all-reduce for the others; the signal ends the job. */
    o.job.stop = o.job.mpi ? NULL : vd_cli_catch_stop();
    ui u = { .quiet = o.c.quiet, .tty = isatty(STDERR_FILENO) != 0 };
    vd_train_job_hooks hooks = { .event = on_event, .planning = on_planning, .ready = on_ready,
                                 .ctx = &u };
    vd_train_job j;
    rc = vd_train_job_run(&j, &o.job, &hooks, &e);
    close_line(&u);
    if (!rc && j.world.rank == 0) {   /* --mpi: rank 0 reports */
        rc = report(&j, &o.job, &e);
        if (!rc && j.res.interrupted)
            rc = vd_errf(&e, VD_ESTOP, "at iteration %lld%s", (long long)j.res.iters_done,
                         o.job.save ? "; checkpoint saved" : "");
    }
    vd_train_job_close(&j);
    if (rc == VD_ESTOP) return vd_cli_stopped(PROG, &e);
    if (rc) {
        rc = vd_cli_fail(PROG, &e);
        if (o.job.mpi) vd_mpi_abort(rc);   /* the other ranks may wait for this one */
    }
    vd_mpi_finalize();
    return rc;
}
