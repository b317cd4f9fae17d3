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

static const char *const PROG = "vdnn-train";

static void usage(FILE *f) {
    char pol[160];
    vd_cli_policies(pol, sizeof pol);
    fprintf(f,
"usage: vdnn-train NET.yaml [options]\n"
"\n"
"Train the network described by NET.yaml (see vdnn-net(5)) inside a device\n"
"memory budget, offloading activations to host memory as the plan decides.\n"
"Options override the spec's train: section. Without --data the net trains on\n"
"synthetic data.\n"
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
"  --lr F               base learning rate (the spec's lr_policy applies to it)\n"
"  --momentum F         SGD momentum (torch.optim.SGD semantics)\n"
"  --wd F               weight decay (alias --weight-decay)\n"
"  --seed N             seed for initialisation, data order and dropout\n"
"  --data SPEC          mnist:DIR | cifar10:DIR | folder:DIR | synthetic[:TRAIN[,TEST]]\n"
"  --augment            folder data: random crop along the longer side + flip\n"
"  --loader-threads N   data loader threads (default: the cores, at most 16;\n"
"                       vdnn-loader-bench measures the rate per thread count)\n"
"\n"
"Checkpoints (safetensors; FILE loads into torchvision, FILE.state holds the rest):\n"
"  --save FILE          write a checkpoint at the end (and on SIGINT,\n"
"                       SIGTERM, SIGHUP, or a data error later in the run)\n"
"  --save-every N       also write it every N iterations\n"
"  --save-dtype T       f32 | bf16: dtype of FILE's weights (default f32; bf16 is\n"
"                       rounded to nearest even, FILE.state's momentum stays f32)\n"
"  --resume FILE        continue exactly: weights, momentum, iteration, data position\n"
"                       (without --data: the data FILE was trained on)\n"
"  --init FILE          start from FILE's weights only\n"
"                       (--init and --resume read F32, BF16 and F16 tensors)\n"
"\n"
"Memory plan (the same options and defaults as vdnn-plan; see vdnn-plan(1)):\n"
"  --budget SIZE        device memory pool, e.g. 12G, 512M (default: what the plan\n"
"                       needs, within what the device can give = free memory\n"
"                       after setup - 512 MiB)\n"
"  --policy P           %s (default: auto =\n                       none when the net fits, else the fastest plan)\n"
"  --prefetch P         auto | paper (when prefetches are issued; default auto)\n"
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
"                       (iteration, loss, avg, lr, images/s, accuracy, elapsed\n"
"                       time), flushed as written\n"
"  --step-times         after training, the last iteration's steps measured on the\n"
"                       compute stream beside the simulator's prediction, and\n"
"                       its copies (start, end, GB/s) beside the simulator's\n"
"  --mem-trace          CUDA: synchronize after every step and list the steps\n"
"                       after which the process's device memory grew (slow)\n"
"  --help               this text\n"
"  --version            version and build features\n"
"\n"
"Exit status: 0 ok, 2 usage, 3 spec, 4 io, 5 data, 6 budget, 7 device,\n"
"8 unsupported, 9 nomem, 10 numeric (loss NaN/Inf), 130 / 143 / 129 stopped by\n"
"SIGINT / SIGTERM / SIGHUP (after saving).\n", pol,
        VD_CLI_BACKEND_HELP);
}

/* ---- options ------------------------------------------------------------- */

typedef struct opts {
    vd_cli_common c;            /* NET.yaml and the run setup (shared with vdnn-bench) */
    int64_t iters, epochs, stop_at, save_every, eval_every, log_every, threads;
    bool has_iters, has_epochs, has_lr, has_mom, has_wd;
    bool has_eval_every, has_log_every;
    double lr, momentum, wd;
    const char *data, *save, *resume, *init, *plan_json, *metrics;
    vd_ckpt_dtype save_dtype;   /* --save-dtype */
    bool has_save_dtype;
    bool augment, poison;
    bool mpi;                   /* --mpi */
} opts;

static const vd_cli_flag FLAGS[] = {
    {"batch", true}, {"gpus", true}, {"mpi", false}, {"iters", true}, {"epochs", true}, {"stop-at", true}, {"lr", true}, {"momentum", true},
    {"wd", true}, {"weight-decay", true}, {"seed", true}, {"data", true}, {"augment", false},
    {"loader-threads", true}, {"save", true}, {"save-every", true}, {"save-dtype", true}, {"resume", true},
    {"init", true}, {"backend", true}, {"device", true}, {"budget", true}, {"policy", true},
    {"prefetch", true}, {"profile", true}, {"profile-out", true}, {"analytic-profile", false},
    {"math", true}, {"plan-json", true}, {"no-stage-input", false}, {"conv-tune", true},
    {"conv-api", true}, {"conv-split", true}, {"conv-topk", true}, {"conv-rtc", false},
    {"conv-debug", true}, {"sync-debug", false}, {"step-times", false}, {"mem-trace", false},
    {"deterministic", false}, {"poison", false}, {"eval-every", true}, {"log-every", true},
    {"quiet", false}, {"help", false}, {"version", false}, {"metrics", true},
};

/* vdnn-train's own flags (vd_cli_tool_flag; ctx is the opts). */
static int train_flag(void *ctx, const char *name, const char *val, vd_err *e) {
    opts *o = ctx;
    const int64_t BIG = VD_CKPT_MAX_ITERATION;
    int rc = VD_OK;
    if (!strcmp(name, "iters")) { rc = vd_cli_int(name, val, 0, BIG, &o->iters, e); o->has_iters = true; }
    else if (!strcmp(name, "epochs")) { rc = vd_cli_int(name, val, 1, 1 << 30, &o->epochs, e); o->has_epochs = true; }
    else if (!strcmp(name, "stop-at")) rc = vd_cli_int(name, val, 1, BIG, &o->stop_at, e);
    else if (!strcmp(name, "save-every")) rc = vd_cli_int(name, val, 0, BIG, &o->save_every, e);
    else if (!strcmp(name, "eval-every")) { rc = vd_cli_int(name, val, -1, BIG, &o->eval_every, e); o->has_eval_every = true; }
    else if (!strcmp(name, "log-every")) { rc = vd_cli_int(name, val, 1, BIG, &o->log_every, e); o->has_log_every = true; }
    else if (!strcmp(name, "loader-threads")) rc = vd_cli_int(name, val, 1, 256, &o->threads, e);
    /* the ranges of the spec's train: keys (vdnn-net(5)) */
    else if (!strcmp(name, "lr")) {
        rc = vd_cli_real(name, val, 0, &o->lr, e);
        if (!rc && !(o->lr > 0 && o->lr <= 1e30))
            rc = vd_errf(e, VD_EUSAGE, "--lr: '%s' must be positive (at most 1e30)", val);
        o->has_lr = true;
    } else if (!strcmp(name, "momentum")) {
        rc = vd_cli_real(name, val, 0, &o->momentum, e);
        if (!rc && !(o->momentum < 1))
            rc = vd_errf(e, VD_EUSAGE, "--momentum: '%s' must be in [0, 1)", val);
        o->has_mom = true;
    } else if (!strcmp(name, "wd") || !strcmp(name, "weight-decay")) {
        rc = vd_cli_real(name, val, 0, &o->wd, e);
        if (!rc && !(o->wd <= 1e30))
            rc = vd_errf(e, VD_EUSAGE, "--%s: '%s' must be non-negative (at most 1e30)", name, val);
        o->has_wd = true;
    }
    else if (!strcmp(name, "data")) o->data = val;
    else if (!strcmp(name, "save")) o->save = val;
    else if (!strcmp(name, "save-dtype")) {
        static const char *const ch[] = { "f32", "bf16" };
        rc = vd_cli_choice(name, val, ch, (int)VD_ARRAY_LEN(ch), e);
        if (!rc) o->save_dtype = !strcmp(val, "bf16") ? VD_CKPT_BF16 : VD_CKPT_F32;
        o->has_save_dtype = true;
    }
    else if (!strcmp(name, "resume")) o->resume = val;
    else if (!strcmp(name, "init")) o->init = val;
    else if (!strcmp(name, "augment")) o->augment = true;
    else if (!strcmp(name, "poison")) o->poison = true;
    else if (!strcmp(name, "mpi")) o->mpi = true;
    else if (!strcmp(name, "plan-json")) o->plan_json = val;
    else if (!strcmp(name, "metrics")) o->metrics = val;
    return rc;
}

/* Returns VD_OK, an error, or -1 for --help / --version (already printed). */
static int parse_args(int argc, char **argv, opts *o, vd_err *e) {
    memset(o, 0, sizeof *o);
    int rc = vd_cli_parse(argc, argv, PROG, usage, FLAGS, (int)VD_ARRAY_LEN(FLAGS), &o->c,
                          train_flag, o, e);
    if (rc) return rc;
    if (o->resume && o->init)
        return vd_errf(e, VD_EUSAGE, "--resume and --init exclude each other");
    if (o->save_every && !o->save)
        return vd_errf(e, VD_EUSAGE, "--save-every needs --save FILE");
    if (o->has_save_dtype && !o->save)
        return vd_errf(e, VD_EUSAGE, "--save-dtype needs --save FILE");
    if (o->mpi && o->c.cfg.gpus)
        return vd_errf(e, VD_EUSAGE, "--mpi and --gpus exclude each other: under --mpi each "
                       "process that mpirun starts is one rank (mpirun -np N ... --mpi)");
    if (o->has_iters && o->has_epochs)
        return vd_errf(e, VD_EUSAGE, "--iters and --epochs exclude each other (give one: the "
                       "number of iterations, or of epochs)");
    return VD_OK;
}

/* ---- progress ------------------------------------------------------------- */

typedef struct ui {
    bool quiet, tty;
    bool line_open;             /* a \r progress line is on screen */
    int batch;
    vd_session *ses;            /* device memory is sampled at each report */
    vd_metrics *metrics;        /* --metrics FILE, or NULL */
    bool metrics_failed;        /* a record could not be written (warned once) */
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
    if (u->ses && (ev->kind == VD_TEV_PROGRESS || ev->kind == VD_TEV_EVAL))
        vd_session_mem_sample(u->ses);
    vd_err me = {0};
    if (u->metrics && !u->metrics_failed && vd_metrics_event(u->metrics, ev, &me)) {
        /* the run matters more than its log: warn once and train on */
        close_line(u);
        fprintf(stderr, "%s: warning: --metrics: %s; no more records are written\n", PROG, me.msg);
        u->metrics_failed = true;
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
        /* img/s end to end; per iteration: the step (compute) and the wait for data */
        fprintf(stderr, "iter %lld/%lld  loss %.4f  avg %.4f  lr %.4g  %.1f img/s  "
                "step %.1f ms  data wait %.1f ms  ETA %s",
                (long long)ev->iter, (long long)ev->total, (double)ev->loss, ev->avg_loss,
                ev->lr, ev->img_per_s, 1e3 * ev->win.step_per_iter_s,
                1e3 * ev->win.wait_per_iter_s, eta);
        if (ev->loss_scaled)   /* math fp16 */
            fprintf(stderr, "  scale %g  skipped %lld", ev->loss_scale, (long long)ev->skipped);
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

/* --step-times: the last training iteration's steps, measured on the
 * compute stream (duration = end - previous end, stalls included) beside the
 * simulator's, the VD_STEP_TIMES_ROWS steps measured furthest over their
 * prediction first, then the totals. Where an iteration is slower than
 * predicted, this says at which steps. */
enum { VD_STEP_TIMES_ROWS = 15 };
static void report_step_times(const vd_exec *ex, const vd_plan *plan, const vd_net *net) {
    const double *end = NULL;
    int n = vd_exec_step_times(ex, &end);
    if (n <= 0) return;
    double *dur = vd_malloc(2 * (size_t)n * sizeof *dur, NULL), *pdur = dur + n;   /* measured, predicted */
    bool *shown = vd_calloc((size_t)n, sizeof *shown, NULL);
    if (!dur || !shown) {
        fprintf(stderr, "%s: step times: out of memory\n", PROG);
        vd_free(dur);
        vd_free(shown);
        return;
    }
    for (int s = 0; s < n; s++) {
        dur[s] = end[s] - (s ? end[s - 1] : 0.0);
        pdur[s] = 1e3 * (plan->steps[s].t_end - (s ? plan->steps[s - 1].t_end : 0.0));
    }
    int rows = n < VD_STEP_TIMES_ROWS ? n : VD_STEP_TIMES_ROWS;
    printf("step times (last iteration, compute stream; ms): the %d steps furthest over the "
           "prediction\n  %-5s %-28s %10s %10s %9s %10s %10s\n", rows, "step", "op", "measured",
           "predicted", "over", "ends at", "predicted");
    for (int r = 0; r < rows; r++) {
        int s = -1;
        for (int t = 0; t < n; t++)
            if (!shown[t] && (s < 0 || dur[t] - pdur[t] > dur[s] - pdur[s])) s = t;
        shown[s] = true;
        const vd_step *st = &plan->steps[s];
        char nm[64];
        if (st->layer >= 0)
            snprintf(nm, sizeof nm, "%s %s", st->kind == VD_STEP_BWD ? "bwd" : "fwd",
                     net->layers[st->layer].name);
        else
            snprintf(nm, sizeof nm, "sgd");
        printf("  %-5d %-28.28s %10.3f %10.3f %+9.3f %10.3f %10.3f\n", s, nm, dur[s], pdur[s],
               dur[s] - pdur[s], end[s], 1e3 * st->t_end);
    }
    printf("  all %d steps: measured %.3f ms, predicted %.3f ms (compute stream; the loss "
           "readback follows)\n", n, end[n - 1], 1e3 * plan->steps[n - 1].t_end);
    vd_free(dur);
    vd_free(shown);
}

/* --step-times, the copies of that iteration beside the simulator's: per
 * direction the count, bytes, the stream's busy time and the rate that
 * makes (against the profile's one-way bandwidth), then the
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
        printf("  %s: %d cop%s, %s, busy %.3f ms: %.1f GB/s (profile %.1f GB/s one way, %.1f "
               "both ways together)\n", d ? "H2D" : "D2H", cnt, cnt == 1 ? "y" : "ies",
               vd_fmt_bytes((uint64_t)bytes, b, sizeof b), busy,
               busy > 0 ? bytes / (busy * 1e-3) / 1e9 : 0.0,
               (d ? dev->h2d_bw : dev->d2h_bw) / 1e9, dev->both_bw / 1e9);
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
         * launch, when loading is lazy) and after them (none expected). */
        uint64_t base = m->used_created + m->first_use;
        uint64_t later = r.used_max > base ? r.used_max - base : 0;
        printf("growth beyond the pool: at its creation %s; ", vd_fmt_bytes(m->pool_growth, a, sizeof a));
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

/* --plan-json FILE: the plan that runs, as vdnn-plan --format json prints it
 * (vd_stream_writer; ctx is a plan_out). */
typedef struct plan_out { const vd_plan *plan; const vd_net *net; } plan_out;
static int write_plan_json(FILE *f, const void *ctx, vd_err *e) {
    const plan_out *po = ctx;
    return vd_plan_write_json(f, po->plan, po->net, NULL, e);
}


/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    opts o;
    vd_err e = {0};
    int rc = parse_args(argc, argv, &o, &e);
    if (rc < 0) return 0;
    if (rc) return vd_cli_fail(PROG, &e);
    /* --mpi: this process is rank world.rank of the job; the ranks are its
     * processes (as --gpus world.size); rank 0 alone logs and writes */
    vd_world world = { .rank = 0, .size = 1 };
    if (o.mpi) {
        if ((rc = vd_mpi_init(&world, &e))) {
            rc = vd_cli_fail(PROG, &e);
            vd_mpi_abort(rc);   /* MPI may be up, the others waiting */
            return rc;
        }
        o.c.cfg.gpus = world.size;
        if (world.rank > 0) {
            o.c.quiet = true;
            o.metrics = o.plan_json = o.c.cfg.profile_out = NULL;
        }
    }

    /* SIGINT, SIGTERM, SIGHUP: every phase stops at its next check; training
     * saves (--save) first. The exit status is then 128 + the signal (130,
     * 143, 129), as if the signal had killed the process. Not under --mpi:
     * the processes would stop at different iterations, some waiting in an
     * all-reduce for the others; the signal ends the job. */
    volatile sig_atomic_t *stop = o.mpi ? NULL : vd_cli_catch_stop();
    vd_net net;
    vd_net_init(&net);
    vd_backend *be = NULL;
    vd_dataset *ds = NULL;
    vd_session ses;
    memset(&ses, 0, sizeof ses);
    vd_plan plan;
    memset(&plan, 0, sizeof plan);
    bool have_ses = false, have_plan = false;
    vd_exec *ex = NULL, *grp = NULL;   /* rank 0's executor; the group of all ranks (--gpus) */
    vd_dp dp;
    memset(&dp, 0, sizeof dp);
    ui u = { .quiet = o.c.quiet, .tty = isatty(STDERR_FILENO) != 0, .ses = &ses };

    rc = vd_spec_load(o.c.spec, &net, &e);
    if (!rc) rc = vd_cli_stop_check("after reading the spec", &e);
    if (rc) goto out;

    /* ---- flags over the spec's train: section ---- */
    vd_train_cfg *tc = &net.train;
    if (o.has_lr) tc->lr = (float)o.lr;
    if (o.has_mom) tc->momentum = (float)o.momentum;
    if (o.has_wd) tc->weight_decay = (float)o.wd;
    if (o.c.has_seed) tc->seed = (uint64_t)o.c.seed;
    if (!(tc->lr > 0)) tc->lr = VD_DEFAULT_LR;
    static char resume_data[sizeof ((vd_train_state *)0)->data];
    if (o.resume) {
        vd_train_state st;
        rc = vd_ckpt_peek_state(o.resume, &net, &st, &e);
        if (rc) goto out;
        if (o.c.has_seed && (uint64_t)o.c.seed != st.seed) {
            rc = vd_errf(&e, VD_EUSAGE, "--seed %lld differs from the seed %llu that %s was "
                         "trained with; drop --seed to resume exactly", (long long)o.c.seed,
                         (unsigned long long)st.seed, o.resume);
            goto out;
        }
        tc->seed = st.seed;
        if (!o.c.cfg.batch) o.c.cfg.batch = st.batch;
        /* the data the checkpoint was trained on (state files of older
         * versions record none, and then --data alone decides) */
        if (st.data[0] && !o.data) {
            snprintf(resume_data, sizeof resume_data, "%s", st.data);
            o.data = resume_data;
            if (!o.c.quiet)
                fprintf(stderr, "%s: no --data: continuing on the data %s was trained on: %s\n",
                        PROG, o.resume, o.data);
        } else if (st.data[0] && strcmp(st.data, o.data) != 0) {
            fprintf(stderr, "%s: warning: --data %s differs from the data %s was trained on "
                    "(%s); continuing on %s, so the run will not repeat an uninterrupted one\n",
                    PROG, o.data, o.resume, st.data, o.data);
        }
    }
    rc = vd_lr_validate(&tc->lr_policy, tc->lr, &e);
    if (rc) goto out;
    /* batch, backend, profile source, policy, budget, ... (config/config.h) */
    vd_config_run run;
    rc = vd_config_resolve(&o.c.cfg, &net, false, &run, &e);
    if (rc && o.mpi) vd_err_prefix(&e, "--mpi under mpirun -np %d", world.size);
    if (rc) goto out;

    /* ---- data ---- */
    rc = vd_data_open(o.data, &net, tc->batch, tc->seed, o.augment, &ds, &e);
    if (rc == VD_EUSAGE && o.data == resume_data) {
        /* not the command line's fault: the state file holds a bad spec */
        vd_err_prefix(&e, "the data spec recorded in %s.state", o.resume);
        rc = e.code = VD_EDATA;
    }
    if (!rc) rc = vd_cli_stop_check("after opening the data", &e);
    if (rc) goto out;
    const vd_data_info *di = vd_data_get_info(ds);
    int64_t per_epoch = (di->n[VD_SPLIT_TRAIN] + tc->batch - 1) / tc->batch;
    int64_t iters;
    int64_t epochs = o.has_iters ? 0 : o.has_epochs ? o.epochs
                   : tc->iters > 0 ? 0 : tc->epochs > 0 ? tc->epochs : 1;
    uint64_t prod = 0;
    if (epochs > 0 && (!vd_mul_u64((uint64_t)epochs, (uint64_t)per_epoch, &prod) ||
                       prod > (uint64_t)1 << 53)) {
        rc = vd_errf(&e, VD_EUSAGE, "%lld epochs of %lld iterations (%s) is too many "
                     "iterations", (long long)epochs, (long long)per_epoch, di->desc);
        goto out;
    }
    if (o.has_iters) iters = o.iters;
    else if (tc->iters > 0 && !o.has_epochs) iters = tc->iters;
    else iters = (int64_t)prod;
    tc->iters = iters;
    if (o.stop_at > iters) {
        rc = vd_errf(&e, VD_EUSAGE, "--stop-at %lld is beyond the run's %lld iterations (the "
                     "last iteration it can stop after is %lld)", (long long)o.stop_at,
                     (long long)iters, (long long)iters);
        goto out;
    }
    /* no output over an input or another output (--save may replace the
     * checkpoint it resumes from: the run reads it whole first) */
    const vd_run_path rp[] = {
        { .flag = "--init", .path = o.init },
        { .flag = "--resume", .path = o.resume },
        { .flag = "--resume", .path = o.resume, .suffix = ".state" },
        { .flag = "--data", .path = vd_data_dir(o.data), .tree = true },
        { .flag = "--save", .path = o.save, .output = true, .may_replace = "--resume" },
        { .flag = "--save", .path = o.save, .suffix = ".state", .output = true,
          .may_replace = "--resume" },
        { .flag = "--save", .path = o.save, .suffix = ".state.prev", .output = true,
          .may_replace = "--resume" },
        { .flag = "--metrics", .path = o.metrics, .output = true },
        { .flag = "--plan-json", .path = o.plan_json, .output = true },
    };
    if ((rc = vd_cli_check_paths(&o.c, rp, (int)VD_ARRAY_LEN(rp), &e))) goto out;
    /* fail before training, not after it, when --save cannot be written */
    if (o.save && world.rank == 0 && (rc = vd_output_check(o.save, &e))) {
        vd_err_prefix(&e, "--save");
        goto out;
    }
    if (o.metrics && (rc = vd_metrics_open(&u.metrics, o.metrics, &e))) {
        vd_err_prefix(&e, "--metrics");
        goto out;
    }

    /* ---- data parallel (train/dp.h): threads and the communicator first ---- */
    if (run.dp) {
        if ((rc = o.mpi ? vd_dp_open_mpi(&dp, &world, run.session.backend, run.session.device, &e)
                        : vd_dp_open(&dp, run.ranks, run.session.backend, run.session.device, &e)))
            goto out;
        vd_dp_session_opts(&dp, 0, &run.session);
    }

    /* ---- backend, layers, profile, plan, executor (train/session.h) ---- */
    if (!o.c.quiet && !o.c.cfg.profile && !o.c.cfg.analytic && vd_backend_cuda_available() &&
        strcmp(run.session.backend, "cpu") != 0)
        fprintf(stderr, "%s: measuring the profile on the GPU...\n", PROG);
    run.session.backend_opts.stop = stop;   /* profiling and cuDNN's tuning */
    rc = vd_session_open(&ses, &net, run.batch, &run.session, &e);
    have_ses = rc == VD_OK;
    if (!rc) rc = vd_cli_stop_check("after profiling", &e);
    if (rc) goto out;
    be = ses.be;
    if (ses.backend_auto && !o.c.quiet)
        fprintf(stderr, "%s: backend %s (auto: %s)\n", PROG, be->name, ses.backend_why);
    if (!o.c.quiet)
        fprintf(stderr, "%s: profile %s (%s, %.1f s)%s%s\n", PROG, ses.prof.source, ses.prof_how,
                ses.prof_s, o.c.cfg.profile_out ? ", saved to " : "",
                o.c.cfg.profile_out ? o.c.cfg.profile_out : "");
    vd_cli_note_raised(&ses, PROG, o.c.quiet);
    vd_config_budget(&run, &ses, NULL);
    vd_cli_plan_progress(&run.plan, PROG, o.c.quiet);
    rc = vd_session_plan(&ses, &run.plan, &plan, &e);
    have_plan = rc == VD_OK || rc == VD_EBUDGET;
    if (rc == VD_OK || rc == VD_EBUDGET) {   /* a stop ends a search early: not a budget error */
        int src = vd_cli_stop_check("while planning", &e);
        if (src) rc = src;
    }
    if (rc) goto out;
    if (run.dp && (rc = vd_plan_dp(&plan, &net, &ses.prof, run.ranks, 0, &e))) goto out;
    if (o.plan_json &&
        (rc = vd_write_stream_atomic(o.plan_json, write_plan_json, &(plan_out){&plan, &net}, &e))) {
        vd_err_prefix(&e, "--plan-json");
        goto out;
    }
    vd_cli_warn_auto_cpu(PROG, &ses, plan.sim.iter_s, iters);
    rc = vd_session_exec(&ses, &plan, o.poison, &ex, &e);
    if (!rc) rc = vd_cli_stop_check("before training", &e);
    if (rc) goto out;
    if (run.dp) {
        /* ranks 1..N-1 plan for the same budget on their own devices */
        if ((rc = vd_dp_start_peers(&dp, &net, &run.session, &run.plan, run.budget_given, o.poison,
                                    &e)) ||
            (rc = vd_dp_group(&dp, ex, &grp, &e)))
            goto out;
    }

    if (!o.c.quiet) {
        char b1[32], b2[32];
        fprintf(stderr, "%s: net %s (%lld parameters), batch %d, %lld iterations "
                "(%.2f epochs of %s)\n", PROG, net.name, (long long)net.n_trainable, tc->batch,
                (long long)iters, (double)iters * tc->batch / (double)di->n[VD_SPLIT_TRAIN],
                di->desc);
        fprintf(stderr, "%s: lr %g (%s%s), momentum %g, weight decay %g, seed %llu\n", PROG,
                (double)tc->lr, vd_lr_policy_name(&tc->lr_policy),
                tc->lr_policy.warmup ? " + warmup" : "", (double)tc->momentum,
                (double)tc->weight_decay, (unsigned long long)tc->seed);
        char b3[32], capmsg[96];
        snprintf(capmsg, sizeof capmsg, " (default: what the plan needs, within the %s the "
                 "device can give)", vd_fmt_bytes(run.plan.budget, b3, sizeof b3));
        fprintf(stderr, "%s: plan: policy %s, budget %s%s, peak %s, offload %s/iter, "
                "predicted %.4f s/iter (%s)\n", PROG, vd_policy_name(plan.policy),
                vd_fmt_bytes(plan.budget, b1, sizeof b1),
                run.budget_given ? "" : ses.cuda ? capmsg : " (default: what the plan needs)",
                vd_fmt_bytes(plan.live_peak, b2, sizeof b2),
                vd_fmt_bytes(plan.offload_bytes, (char[32]){0}, 32), plan.sim.iter_s,
                ses.prof.source);
        if (run.dp && run.ranks == 1)
            fprintf(stderr, "%s: data parallel: 1 rank (%s all-reduce of every gradient bucket; "
                    "the same bytes as without --gpus)\n", PROG, dp.ar[0]->name);
        else if (run.dp)
            fprintf(stderr, "%s: data parallel: %d rank%s (%s all-reduce), %d samples each; "
                    "gradients %s in %d bucket%s, predicted all-reduce %.2f ms (%.2f ms exposed): "
                    "%.4f s/iter\n", PROG, run.ranks, run.ranks == 1 ? "" : "s",
                    dp.ar[0]->name, run.batch, vd_fmt_bytes(plan.dp.grad_bytes, b1, sizeof b1),
                    plan.dp.n_buckets, plan.dp.n_buckets == 1 ? "" : "s",
                    1e3 * plan.dp.allreduce_s, 1e3 * plan.dp.exposed_s,
                    plan.dp.ranks > 1 ? plan.dp.iter_s : plan.sim.iter_s);
    }

    /* ---- train ---- */
    u.batch = tc->batch;
    int64_t log_every = o.has_log_every ? o.log_every : (iters / 20 > 0 ? iters / 20 : 1);
    if (!o.has_log_every && log_every > 100) log_every = 100;
    vd_train_opts to = {
        .iters = iters, .stop_at = o.stop_at, .save_path = o.save, .save_every = o.save_every,
        .save_dtype = o.save_dtype,
        .resume_path = o.resume, .init_path = o.init,
        .eval_every = o.has_eval_every && o.eval_every > 0 ? o.eval_every : 0,
        .eval_at_end = !(o.has_eval_every && o.eval_every < 0),
        .log_every = log_every, .stop = stop, .loader_threads = (int)o.threads,
        .data_spec = o.data && *o.data ? o.data : "synthetic",
        .cb = world.rank == 0 ? on_event : NULL, .user = &u,
    };
    vd_train_result res;
    rc = vd_train_run(&net, grp ? grp : ex, ds, &to, &res, &e);
    close_line(&u);
    if (rc || world.rank > 0) goto out;   /* --mpi: rank 0 reports */

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
    if (res.loss_scaled)
        printf("loss scaling (fp16): scale %g at the end, %lld steps skipped (inf/NaN "
               "gradients)\n", res.loss_scale, (long long)res.skipped);
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
    if (res.timing.iters > 0) {
        const vd_train_timing *tm = &res.timing;
        char threads[64];
        if (res.synth_device)
            snprintf(threads, sizeof threads, "synthetic batches generated on the device");
        else
            snprintf(threads, sizeof threads, "%d loader threads", res.loader_threads);
        printf("end to end: %.1f img/s (%lld iterations in %.2f s wall clock, saves and "
               "evaluations excluded); per iteration: step %.4f s, waiting for data %.4f s "
               "(%.1f%%, %s)\n", tm->img_per_s, (long long)tm->iters, tm->wall_s,
               tm->step_per_iter_s, tm->wait_per_iter_s,
               tm->wall_s > 0 ? 100.0 * tm->wait_s / tm->wall_s : 0.0, threads);
    }
    /* data parallel: the prediction includes the all-reduce (plan.dp) */
    double pred = plan.dp.ranks > 1 ? plan.dp.iter_s : plan.sim.iter_s;
    if (res.mean_iter_s > 0)
        printf("iteration time (compute only, data waits excluded): measured %.4f s "
               "(%.1f img/s), predicted %.4f s (%s, %+.0f%%)\n",
               res.mean_iter_s, tc->batch / res.mean_iter_s, pred, ses.prof.source,
               pred > 0 ? 100.0 * (res.mean_iter_s - pred) / pred : 0.0);
    if (run.dp)
        printf("data parallel: %d rank%s of %d samples (global batch %d), %s all-reduce; the "
               "memory figures are rank 0's\n", run.ranks, run.ranks == 1 ? "" : "s", run.batch,
               tc->batch, dp.ar[0]->name);
    report_device_memory(&ses, &plan, &st, trained);
    report_host_memory();
    if (trained) report_step_times(ex, &plan, &net);
    if (trained) report_copy_times(ex, &plan, &ses.prof.dev);
    if (res.interrupted) {
        vd_errf(&e, VD_ESTOP, "at iteration %lld%s", (long long)res.iters_done,
                o.save ? "; checkpoint saved" : "");
        rc = vd_cli_stopped(PROG, &e);
    }

out:
    close_line(&u);
    {
        vd_err ce = {0};
        if (vd_metrics_close(&u.metrics, &ce) && !u.metrics_failed)
            fprintf(stderr, "%s: warning: --metrics: %s\n", PROG, ce.msg);
    }
    vd_exec_destroy(&grp);
    vd_dp_close_peers(&dp);
    vd_exec_destroy(&ex);
    if (have_plan) vd_plan_free(&plan);
    if (have_ses) vd_session_close(&ses);
    vd_dp_close(&dp);
    vd_data_close(&ds);
    vd_net_free(&net);
    if (rc == VD_ESTOP) {
        rc = vd_cli_stopped(PROG, &e);
    } else if (rc && rc < 128) {
        rc = vd_cli_fail(PROG, &e);
        /* --mpi: the other ranks may wait for this one in a collective */
        if (world.size > 1) vd_mpi_abort(rc);
    }
    vd_mpi_finalize();
    return rc;
}
