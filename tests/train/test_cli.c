/* test_cli.c — vdnn-train as a program: exit codes, --help, resume through
 * the CLI; bf16 math (train.math, --math, profiles of another math, the
 * checkpoints of every policy). Runs $VD_BUILDDIR/vdnn-train (and
 * vdnn-plan) on $VD_SRCDIR/nets/lenet.yaml and on specs written here. */
#include <jansson.h>
#include <sys/stat.h>
#include "tutil.h"
#include "vd_config.h"
#include "backend/backend.h"
#include "plan/plan.h"
#include "spec/spec.h"
#include "train/ckpt.h"

static char g_bin[1024], g_net[1024], g_plan[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_bin, sizeof g_bin, "%s/vdnn-train", b);
    snprintf(g_plan, sizeof g_plan, "%s/vdnn-plan", b);
    snprintf(g_net, sizeof g_net, "%s/nets/lenet.yaml", s);
}

/* Run "vdnn-train ARGS" (ARGS may use %s for the lenet spec path, once);
 * return the exit status; stderr+stdout go to *out (malloc'd) if out. */
static int run(char **out, const char *args) {
    char a[2048];
    if (strstr(args, "%s")) snprintf(a, sizeof a, args, g_net);
    else snprintf(a, sizeof a, "%s", args);
    return vdt_run_bin(g_bin, a, true, out);
}

static void expect(int code, const char *want, const char *args) {
    char *out;
    int rc = run(&out, args);
    ck_assert_msg(rc == code, "vdnn-train %s: exit %d, expected %d; output:\n%s", args, rc, code, out);
    if (want) ck_assert_msg(strstr(out, want), "vdnn-train %s: no '%s' in:\n%s", args, want, out);
    vd_free(out);
}

START_TEST(usage_errors_exit_2) {
    setup();
    expect(2, "missing NET.yaml", "");
    expect(2, "did you mean '--iters'", "%s --iter 5");
    expect(2, "unknown option", "%s -x");
    expect(2, "--batch", "%s --batch 0");
    expect(2, "--batch", "%s --batch 12abc");
    expect(2, "--lr", "%s --lr -1");
    expect(2, "--lr", "%s --lr nan");
    expect(2, "--policy", "%s --policy everything");
    expect(2, "did you mean 'cuda'", "%s --backend cudaa");
    expect(2, "--math", "%s --math fp8");
    expect(2, "needs a value", "%s --iters");
    expect(2, "takes no value", "%s --quiet=1");
    expect(2, "exclude", "%s --resume a --init b");
    expect(2, "--save-every needs --save", "%s --save-every 5");
    expect(2, "--keep 0 would remove every numbered checkpoint",
           "%s --save x.safetensors --save-every 5 --keep 0");
    expect(2, "--keep needs --save-every", "%s --save x.safetensors --keep 3");
    expect(2, "--save-best needs --save", "%s --save-best");
    expect(2, "--save-best needs evaluations",
           "%s --save x.safetensors --save-best --eval-every -1");
    expect(2, "--early-stop needs evaluation during the run", "%s --early-stop 3");
    expect(2, "--early-stop needs evaluation during the run", "%s --early-stop 3 --eval-every 0");
    expect(2, "--early-stop 0 would stop", "%s --early-stop 0 --eval-every 5");
    expect(2, "--save-dtype needs --save", "%s --save-dtype bf16");
    expect(2, "did you mean 'bf16'", "%s --save x.safetensors --save-dtype bf61");
    expect(2, "expected f32 | bf16", "%s --save x.safetensors --save-dtype f16");
    expect(2, "exclude", "%s --profile p.json --analytic-profile");
    expect(2, "--budget", "%s --budget 12Q");
    expect(2, "one NET.yaml", "%s other.yaml");
    expect(2, "unknown data kind", "%s --data mnst:x");
    expect(2, "expects input", "%s --data cifar10:/nonexistent");
    /* the optimizer's flags: each with its own optimizer only, in torch's ranges */
    expect(2, "did you mean 'adamw'", "%s --optimizer adam");
    expect(2, "--momentum is SGD's", "%s --optimizer adamw --momentum 0.5");
    expect(2, "--betas is AdamW's", "%s --betas 0.9,0.99");
    expect(2, "--betas: '0.9,1.5' is not two numbers", "%s --optimizer adamw --betas 0.9,1.5");
    expect(2, "needs momentum > 0", "%s --nesterov --momentum 0");
}
END_TEST

START_TEST(other_exit_codes) {
    setup();
    char *d = vdt_tmpdir("vdnn-train-test");
    char args[1400];
    expect(4, NULL, "/nonexistent/net.yaml");
    snprintf(args, sizeof args, "%s/bad.yaml", d);
    tu_write(args, "name: x\nlayers: [ {name: a, type: nonsense} ]\n", 45);
    expect(3, NULL, args);
    expect(4, "/nonexistent/train-images-idx3-ubyte", "%s --data mnist:/nonexistent");
    /* a truncated IDX file: 5, naming the file */
    char p[700];
    const char *names[] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" };
    unsigned char hdr[16] = { 0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28 };
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", d, names[i]);
        tu_write(p, hdr, 16);        /* promises 2 images, holds none */
    }
    snprintf(args, sizeof args, "%%s --data mnist:%s", d);
    expect(5, "train-images-idx3-ubyte: truncated", args);
    expect(6, NULL, "%s --budget 4K --data synthetic:64,16 --iters 1");
    /* --profile-out writes the profile; --profile plans from it (same batch only) */
    snprintf(args, sizeof args, "%%s --data synthetic:64,16 --iters 1 --batch 8 --profile-out %s/p.json", d);
    expect(0, "predicted", args);
    snprintf(args, sizeof args, "%%s --data synthetic:64,16 --iters 1 --batch 8 --profile %s/p.json", d);
    expect(0, "(loaded", args);
    snprintf(args, sizeof args, "%%s --data synthetic:64,16 --iters 1 --batch 4 --profile %s/p.json", d);
    expect(5, NULL, args);
    expect(10, "loss became", "%s --lr 1e30 --data synthetic:256,16 --iters 20 --batch 8");
    /* epochs x iterations per epoch must not overflow: 2^30 epochs of 2^40 */
    expect(2, "too many", "%s --data synthetic:1099511627776 --batch 1 --epochs 1073741824");
    /* an unwritable --save fails before training, not after it: 4, naming the path */
    char *out0;
    snprintf(args, sizeof args, "%%s --data synthetic:64,16 --iters 3 --batch 8 --save "
             "%s/no/such/dir/ck.safetensors", d);
    ck_assert_int_eq(run(&out0, args), 4);
    ck_assert_msg(strstr(out0, "no/such/dir/ck.safetensors") && !strstr(out0, "training iterations"),
                  "%s", out0);
    vd_free(out0);
    snprintf(args, sizeof args, "%%s --data synthetic:64,16 --iters 3 --batch 8 --save %s", d);
    ck_assert_int_eq(run(&out0, args), 4);
    ck_assert_msg(strstr(out0, "is a directory") && !strstr(out0, "training iterations"),
                  "%s", out0);
    vd_free(out0);
    if (!vd_backend_cuda_available())
        expect(VD_HAVE_CUDA ? VD_EDEVICE : VD_EUNSUPPORTED, NULL,
               "%s --backend cuda --data synthetic:64,16 --iters 1");
    char *out;
    ck_assert_int_eq(run(&out, "--version"), 0);
    ck_assert_msg(strstr(out, "vdnn-train " VD_VERSION), "%s", out);
    vd_free(out);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(help_lists_every_flag) {
    setup();
    char *out;
    ck_assert_int_eq(run(&out, "--help"), 0);
    static const char *const flags[] = {
        "--batch", "--iters", "--epochs", "--stop-at", "--lr", "--momentum", "--wd", "--seed",
        "--data", "--augment", "--loader-threads", "--save", "--save-every", "--save-dtype", "--resume",
        "--init", "--backend", "--device", "--budget", "--policy", "--prefetch", "--profile",
        "--profile-out", "--analytic-profile", "--math", "--deterministic", "--poison", "--eval-every",
        "--log-every", "--quiet", "--help", "--version", "--plan-json", "--no-stage-input",
        "--conv-tune", "--conv-api", "--conv-split", "--conv-topk", "--conv-rtc", "--conv-debug",
        "--no-fuse", "--sync-debug", "--step-times", "--step-times-out", "--mem-trace", "--keep", "--save-best",
        "--early-stop", "--list-nets", "--optimizer", "--nesterov", "--betas", "--eps",
        "--val-split", "--metrics" };
    /* each in --help and in the man page (where dashes are written \-) */
    char man[1100];
    snprintf(man, sizeof man, "%s/man/vdnn-train.1", getenv("VD_SRCDIR"));
    size_t mn;
    char *page = vdt_slurp(man, &mn);
    for (size_t i = 0; i < VD_ARRAY_LEN(flags); i++) {
        ck_assert_msg(strstr(out, flags[i]), "--help does not mention %s", flags[i]);
        char roff[64] = "", *w = roff;
        for (const char *c = flags[i]; *c; c++) {
            if (*c == '-') *w++ = '\\';
            *w++ = *c;
        }
        *w = 0;
        ck_assert_msg(strstr(page, roff), "vdnn-train.1 does not mention %s", flags[i]);
    }
    ck_assert_msg(!strstr(page, "VDNN_"), "vdnn-train.1 names an environment knob");
    vd_free(page);
    vd_free(out);
}
END_TEST

START_TEST(resume_through_the_cli) {
    setup();
    char *d = vdt_tmpdir("vdnn-train-test");
    char args[2000], a[700], b[700], c[700], as[760], bs[760], cs[760];
    snprintf(a, sizeof a, "%s/a.safetensors", d);
    snprintf(b, sizeof b, "%s/b.safetensors", d);
    snprintf(c, sizeof c, "%s/c.safetensors", d);
    const char *common = "--data synthetic:200,48 --batch 16 --policy all --deterministic "
                         "--log-every 2";
    char *out;
    snprintf(args, sizeof args, "%%s %s --iters 9 --save %s", common, c);
    ck_assert_int_eq(run(&out, args), 0);
    /* non-TTY progress: plain lines, one per report */
    ck_assert_msg(strstr(out, "iter 2/9") && strstr(out, "iter 9/9") && !strchr(out, '\r'),
                  "%s", out);
    ck_assert_msg(strstr(out, "test accuracy") && strstr(out, "(48 held-out images)"), "%s", out);
    ck_assert_msg(strstr(out, "high-water") && strstr(out, "offloaded") &&
                  strstr(out, "predicted"), "%s", out);
    /* the end-to-end line names where the synthetic batches were made */
    ck_assert_msg(strstr(out, "end to end:") &&
                  strstr(out, "synthetic batches generated on the device"), "%s", out);
    vd_free(out);
    snprintf(args, sizeof args, "%%s %s --iters 9 --stop-at 4 --save %s --quiet", common, a);
    ck_assert_int_eq(run(&out, args), 0);
    ck_assert_msg(strstr(out, "iter ") == NULL, "--quiet printed progress:\n%s", out);
    vd_free(out);
    snprintf(args, sizeof args, "%%s %s --iters 9 --resume %s --save %s", common, a, b);
    ck_assert_int_eq(run(&out, args), 0);
    ck_assert_msg(strstr(out, "resumed from"), "%s", out);
    vd_free(out);
    vdt_assert_same_file(b, c);
    snprintf(as, sizeof as, "%s.state", a);
    snprintf(bs, sizeof bs, "%s.state", b);
    snprintf(cs, sizeof cs, "%s.state", c);
    vdt_assert_same_file(bs, cs);
    /* resuming a checkpoint that is already at --iters trains nothing, but a
     * --save elsewhere is still written: the copy equals the checkpoint */
    char e2[700], e2s[760];
    snprintf(e2, sizeof e2, "%s/e.safetensors", d);
    snprintf(e2s, sizeof e2s, "%s.state", e2);
    snprintf(args, sizeof args, "%%s %s --iters 9 --resume %s --save %s", common, b, e2);
    ck_assert_int_eq(run(&out, args), 0);
    ck_assert_msg(strstr(out, "saved"), "%s", out);
    vd_free(out);
    vdt_assert_same_file(b, e2);
    vdt_assert_same_file(bs, e2s);
    /* --save-dtype bf16: the weights are BF16 in the file, and a resume from
     * it continues (from the rounded weights, saying so) */
    char h[700], h2[700];
    snprintf(h, sizeof h, "%s/h.safetensors", d);
    snprintf(h2, sizeof h2, "%s/h2.safetensors", d);
    snprintf(args, sizeof args, "%%s %s --iters 9 --stop-at 4 --save %s --save-dtype bf16 --quiet",
             common, h);
    expect(0, NULL, args);
    size_t hn;
    char *raw = vdt_slurp(h, &hn);
    ck_assert_msg(strstr(raw + 8, "\"conv1.weight\":{\"dtype\":\"BF16\"") &&
                  !strstr(raw + 8, "\"F32\""), "%.300s", raw + 8);
    vd_free(raw);
    snprintf(args, sizeof args, "%%s %s --iters 9 --resume %s --save %s", common, h, h2);
    expect(0, "holds BF16 weights", args);
    raw = vdt_slurp(h2, &hn);                 /* --save-dtype is not inherited: F32 */
    ck_assert_msg(strstr(raw + 8, "\"conv1.weight\":{\"dtype\":\"F32\""), "%.300s", raw + 8);
    vd_free(raw);
    /* AdamW: its settings in the start line; a checkpoint of it does not
     * resume with the spec's SGD (2, before anything runs; resuming with
     * --optimizer adamw gives the bytes of a straight run:
     * tests/train/test_resume.c) */
    char w[700];
    snprintf(w, sizeof w, "%s/w.safetensors", d);
    snprintf(args, sizeof args, "%%s %s --iters 4 --stop-at 2 --optimizer adamw --betas 0.8,0.99 "
             "--eps 1e-6 --save %s", common, w);
    expect(0, "optimizer adamw (betas 0.8, 0.99, eps 1e-06), lr 0.01", args);
    snprintf(args, sizeof args, "%%s %s --iters 4 --resume %s", common, w);
    expect(2, "was trained with optimizer adamw, and this run's is sgd", args);
    /* --seed must agree with the checkpoint's */
    snprintf(args, sizeof args, "%%s %s --iters 9 --resume %s --seed 99", common, a);
    expect(2, "seed", args);
    /* --init takes the weights only and restarts at iteration 0 */
    snprintf(args, sizeof args, "%%s %s --iters 2 --init %s", common, b);
    expect(0, "iterations 0..2", args);
    /* --iters 0: evaluate the --init weights only */
    snprintf(args, sizeof args, "%%s %s --iters 0 --init %s", common, b);
    expect(0, "no training iterations ran", args);
    /* --init into a net of another shape: 5, naming the first mismatch */
    char *spec;
    size_t n;
    vd_err e;
    ck_assert_int_eq(vd_read_file(g_net, &spec, &n, &e), 0);
    char *hit = strstr(spec, "out: 6,");
    ck_assert_ptr_nonnull(hit);
    hit[5] = '8';                             /* conv1: 8 filters instead of 6 */
    char wide[760];
    snprintf(wide, sizeof wide, "%s/lenet8.yaml", d);
    tu_write(wide, spec, n);
    vd_free(spec);
    snprintf(args, sizeof args, "%s %s --iters 2 --init %s", wide, common, b);
    expect(5, "conv1.weight", args);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST


/* A save interrupted between the state rename and the model rename leaves
 * the old model beside the new state. --resume must fall back to
 * FILE.state.prev (the old pair) and finish with the same bytes as an
 * uninterrupted run; without --data it continues on the data the checkpoint
 * recorded, and a different --data is used with a warning naming both. */
/* vd_ckpt_save_opts.after_state: count the call, stop the save there. */
static int crash_after_state(void *ctx, const char *path) {
    (void)path;
    ++*(int *)ctx;
    return 1;
}

START_TEST(interrupted_save_and_recorded_data) {
    setup();
    char *d = vdt_tmpdir("vdnn-train-test");
    char args[2000], a[700], b[700], c[700], as[760], ap[760], bs[760], cs[760];
    snprintf(a, sizeof a, "%s/a.safetensors", d);
    snprintf(b, sizeof b, "%s/b.safetensors", d);
    snprintf(c, sizeof c, "%s/c.safetensors", d);
    snprintf(as, sizeof as, "%s.state", a);
    snprintf(ap, sizeof ap, "%s.state.prev", a);
    snprintf(bs, sizeof bs, "%s.state", b);
    snprintf(cs, sizeof cs, "%s.state", c);
    /* not the default synthetic set: resuming on that one gives other bytes */
    const char *data = "--data synthetic:200,48";
    const char *common = "--batch 16 --policy all --deterministic --log-every 2 --eval-every -1";
    char *out;
    snprintf(args, sizeof args, "%%s %s %s --iters 9 --save %s", data, common, c);
    ck_assert_int_eq(run(&out, args), 0);
    vd_free(out);
    snprintf(args, sizeof args, "%%s %s %s --iters 9 --stop-at 4 --save %s", data, common, a);
    ck_assert_int_eq(run(&out, args), 0);
    vd_free(out);
    char *s4, *m4;
    size_t s4n, m4n;
    vd_err e;
    ck_assert_int_eq(vd_read_file(as, &s4, &s4n, &e), 0);
    ck_assert_int_eq(vd_read_file(a, &m4, &m4n, &e), 0);
    /* the crash window: a save of a later iteration (other weights) over a,
     * stopped by the injected after_state hook after the state rename */
    {
        vd_net net;
        vd_net_init(&net);
        ck_assert_msg(vd_spec_load(g_net, &net, &e) == 0, "%s", e.msg);
        net.train.batch = 16;
        ck_assert_msg(vd_net_finalize(&net, &e) == 0, "%s", e.msg);
        float *p = calloc((size_t)net.param_floats, sizeof *p);
        float *m = calloc((size_t)net.param_floats, sizeof *m);
        ck_assert(p && m);
        vd_train_state st;
        ck_assert_msg(vd_ckpt_peek_state(a, &net, &st, &e) == 0, "%s", e.msg);
        ck_assert_msg(vd_ckpt_load_model(a, &net, p, NULL, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(st.iteration, 4);
        p[0] += 1.0f;
        st.iteration = st.sgd_steps = 6;
        int calls = 0;
        vd_ckpt_save_opts so = { .after_state = crash_after_state, .ctx = &calls };
        int rc = vd_ckpt_save_ex(a, &net, p, m, &st, &so, &e);
        ck_assert_msg(rc == VD_EIO && strstr(e.msg, "stopped after the state rename"),
                      "exit %d: %s", rc, e.msg);
        ck_assert_int_eq(calls, 1);
        free(p);
        free(m);
        vd_net_free(&net);
    }
    /* model untouched, state replaced, the previous state kept as .prev */
    char *x;
    size_t xn;
    ck_assert_int_eq(vd_read_file(a, &x, &xn, &e), 0);
    ck_assert_msg(xn == m4n && memcmp(x, m4, xn) == 0, "the model changed before the state");
    vd_free(x);
    ck_assert_int_eq(vd_read_file(as, &x, &xn, &e), 0);
    ck_assert_msg(!(xn == s4n && memcmp(x, s4, xn) == 0), "the state was not replaced");
    vd_free(x);
    ck_assert_int_eq(vd_read_file(ap, &x, &xn, &e), 0);
    ck_assert_msg(xn == s4n && memcmp(x, s4, xn) == 0, "%s is not the previous state", ap);
    vd_free(x);
    vd_free(s4);
    vd_free(m4);
    /* resume without --data: the .prev pair and the recorded data */
    snprintf(args, sizeof args, "%%s %s --iters 9 --resume %s --save %s", common, a, b);
    ck_assert_int_eq(run(&out, args), 0);
    ck_assert_msg(strstr(out, "state.prev") && strstr(out, "interrupted") &&
                  strstr(out, "resumed from") && strstr(out, "at iteration 4"), "%s", out);
    ck_assert_msg(strstr(out, "no --data") && strstr(out, "synthetic:200,48"), "%s", out);
    vd_free(out);
    vdt_assert_same_file(b, c);
    vdt_assert_same_file(bs, cs);
    /* a different --data: continues, with a warning naming both */
    snprintf(args, sizeof args, "%%s --data synthetic:208,48 %s --iters 9 --resume %s", common, a);
    ck_assert_int_eq(run(&out, args), 0);
    ck_assert_msg(strstr(out, "warning: --data synthetic:208,48 differs") &&
                  strstr(out, "(synthetic:200,48)"), "%s", out);
    vd_free(out);
    /* the same --data: no warning */
    snprintf(args, sizeof args, "%%s %s %s --iters 9 --stop-at 5 --resume %s", data, common, a);
    ck_assert_int_eq(run(&out, args), 0);
    ck_assert_msg(!strstr(out, "warning") && !strstr(out, "no --data"), "%s", out);
    vd_free(out);
    /* saving over the interrupted pair keeps the good .prev (the orphan
     * FILE.state is not linked over it) and ends equal to the straight run */
    snprintf(args, sizeof args, "%%s %s --iters 9 --resume %s --save %s", common, a, a);
    ck_assert_int_eq(run(&out, args), 0);
    vd_free(out);
    vdt_assert_same_file(a, c);
    vdt_assert_same_file(as, cs);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- bf16 math ---------------------------------------------------------- */

/* A small net with batch norm, a residual add and a concat; train.math is
 * the %s. */
static const char *const RES_SPEC =
    "name: bf-resnet\n"
    "input: { channels: 3, height: 12, width: 12, classes: 5 }\n"
    "train: { batch: 8, lr: 0.05, momentum: 0.9, weight_decay: 0.0005, seed: 7, math: %s }\n"
    "layers:\n"
    "  - { name: stem, type: conv, out: 8, kernel: 3, pad: 1, bias: false }\n"
    "  - { name: stem_bn, type: batchnorm }\n"
    "  - { name: stem_relu, type: relu }\n"
    "  - { name: b1_conv1, type: conv, out: 8, kernel: 3, pad: 1, bias: false }\n"
    "  - { name: b1_bn1, type: batchnorm }\n"
    "  - { name: b1_relu1, type: relu }\n"
    "  - { name: b1_conv2, type: conv, out: 8, kernel: 3, pad: 1, bias: false }\n"
    "  - { name: b1_bn2, type: batchnorm }\n"
    "  - { name: b1_add, type: add, inputs: [b1_bn2, stem_relu] }\n"
    "  - { name: b1_relu, type: relu }\n"
    "  - { name: pool, type: pool, mode: max, kernel: 2 }\n"
    "  - { name: br1, type: conv, out: 4, kernel: 1 }\n"
    "  - { name: br2, type: conv, inputs: [pool], out: 6, kernel: 3, pad: 1 }\n"
    "  - { name: br2_relu, type: relu }\n"
    "  - { name: cat, type: concat, inputs: [br1, br2_relu] }\n"
    "  - { name: gap, type: pool, mode: avg, global: true }\n"
    "  - { name: fc, type: fc, out: 5 }\n"
    "  - { name: loss, type: softmax_cross_entropy }\n";

/* RES_SPEC with train.math `math` as dir/name. */
static void write_res_spec(const char *path, const char *math) {
    char text[4096];
    int n = snprintf(text, sizeof text, RES_SPEC, math);
    ck_assert(n > 0 && n < (int)sizeof text);
    tu_write(path, text, (size_t)n);
}

/* vdnn-plan SPEC --backend cpu --min-budget --format json EXTRA -> mins[policy]. */
static void cli_min_budgets(const char *spec, const char *extra, uint64_t *mins) {
    char a[2048], *out;
    snprintf(a, sizeof a, "%s --backend cpu --batch 8 --min-budget --format json %s", spec, extra);
    int rc = vdt_run_bin(g_plan, a, false, &out);
    ck_assert_msg(rc == 0, "vdnn-plan %s: exit %d:\n%s", a, rc, out);
    for (int k = 0; k < VD_POLICY_COUNT; k++) {
        char key[32];
        snprintf(key, sizeof key, "\"%s\": ", vd_policy_name((vd_policy)k));
        const char *p = strstr(out, key);
        unsigned long long v = 0;
        ck_assert_msg(p && sscanf(p + strlen(key), "%llu", &v) == 1 && v > 0, "%s", out);
        mins[k] = v;
    }
    vd_free(out);
}

/* From a --plan-json file: the offloaded tensors, and every layer's
 * forward and backward option labels joined into labels[n]. */
static int plan_summary(const char *path, char *labels, size_t n) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    ck_assert_msg(root, "%s: %s", path, je.text);
    int off = (int)json_integer_value(json_object_get(root, "offloaded_tensors"));
    size_t i, o = 0;
    json_t *l;
    labels[0] = 0;
    json_array_foreach(json_object_get(root, "layers"), i, l) {
        int w = snprintf(labels + o, n - o, "%s/%s,",
                         json_string_value(json_object_get(l, "algo_label")),
                         json_string_value(json_object_get(l, "algo_bwd_label")));
        ck_assert(w > 0 && (size_t)w < n - o);
        o += (size_t)w;
    }
    json_decref(root);
    return off;
}

/* vdnn-train SPEC (4 deterministic iterations, batch 8, EXTRA) under each
 * policy, saving d/TAG-POLICY.safetensors: the budgets are the policies'
 * minimums (dyn and auto: all's, where offloading every feature map with
 * the fastest options fits, so that dyn keeps those options and auto may),
 * so each but none offloads. The checkpoints (model and state) are
 * byte-identical to none's wherever the plan runs none's options: always
 * for all, conv and dyn (asserted), for auto when its search kept them.
 * Returns the path of none's checkpoint in none_ck[n]. */
static void policies_same_checkpoint(const char *d, const char *spec, const char *extra,
                                     const char *tag, char *none_ck, size_t n) {
    uint64_t mins[VD_POLICY_COUNT];
    cli_min_budgets(spec, extra, mins);
    char ref_labels[2048] = "", labels[2048];
    for (int k = 0; k < VD_POLICY_COUNT; k++) {
        vd_policy pol = (vd_policy)k;
        const char *p = vd_policy_name(pol);
        uint64_t budget = pol == VD_POLICY_NONE ? 0
                          : pol == VD_POLICY_DYN || pol == VD_POLICY_AUTO ? mins[VD_POLICY_ALL]
                                                                           : mins[k];
        char bud[64] = "", ck[700], pj[700], a[3000], *out;
        if (budget) snprintf(bud, sizeof bud, "--budget %llu", (unsigned long long)budget);
        snprintf(ck, sizeof ck, "%s/%s-%s.safetensors", d, tag, p);
        snprintf(pj, sizeof pj, "%s/%s-%s.json", d, tag, p);
        snprintf(a, sizeof a, "%s --backend cpu --data synthetic:64,16 --batch 8 --iters 4 "
                 "--deterministic --eval-every -1 --quiet --policy %s %s --save %s --plan-json %s %s",
                 spec, p, bud, ck, pj, extra);
        int rc = vdt_run_bin(g_bin, a, true, &out);
        ck_assert_msg(rc == 0, "vdnn-train %s: exit %d:\n%s", a, rc, out);
        vd_free(out);
        int off = plan_summary(pj, labels, sizeof labels);
        if (pol == VD_POLICY_NONE) {
            ck_assert_int_eq(off, 0);
            snprintf(ref_labels, sizeof ref_labels, "%s", labels);
            snprintf(none_ck, n, "%s", ck);
            continue;
        }
        ck_assert_msg(off > 0, "%s %s at %llu offloads nothing", tag, p, (unsigned long long)budget);
        bool same_opts = !strcmp(labels, ref_labels);
        ck_assert_msg(same_opts || pol == VD_POLICY_AUTO, "%s %s: options %s, none's %s", tag, p,
                      labels, ref_labels);
        if (!same_opts) continue;
        vdt_assert_same_file(ck, none_ck);
        char s1[760], s2[760];
        snprintf(s1, sizeof s1, "%s.state", ck);
        snprintf(s2, sizeof s2, "%s.state", none_ck);
        vdt_assert_same_file(s1, s2);
    }
}

static bool same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = vdt_slurp(a, &na), *y = vdt_slurp(b, &nb);
    bool same = na == nb && memcmp(x, y, na) == 0;
    vd_free(x);
    vd_free(y);
    return same;
}

/* bf16: LeNet (--math bf16) and the batch-norm / add / concat net (math:
 * bf16 in its spec) give checkpoints byte-identical to policy none under
 * every policy; and they are bf16 runs: other bytes than fp32's. */
START_TEST(bf16_checkpoints_any_policy) {
    setup();
    char *d = vdt_tmpdir("vdnn-train-bf16");
    char spec[700], lenet_ck[800], res_ck[800], a[2000], ck32[760], *out;
    policies_same_checkpoint(d, g_net, "--math bf16", "lenet", lenet_ck, sizeof lenet_ck);
    snprintf(spec, sizeof spec, "%s/res.yaml", d);
    write_res_spec(spec, "bf16");
    policies_same_checkpoint(d, spec, "", "res", res_ck, sizeof res_ck);
    snprintf(ck32, sizeof ck32, "%s/lenet-fp32.safetensors", d);
    snprintf(a, sizeof a, "%s --backend cpu --data synthetic:64,16 --batch 8 --iters 4 "
             "--deterministic --eval-every -1 --quiet --save %s", g_net, ck32);
    ck_assert_int_eq(vdt_run_bin(g_bin, a, true, &out), 0);
    vd_free(out);
    ck_assert_msg(!same_bytes(ck32, lenet_ck), "LeNet --math bf16 trained exactly as fp32");
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* --math overrides train.math both ways (a bad train.math is a spec error
 * all the same); a profile is for one math: one
 * saved in fp32 is refused for a bf16 run (and the reverse) with exit 5 and
 * a message naming both maths, by vdnn-train and vdnn-plan; a profile
 * without "math" (older files) is fp32's. */
START_TEST(math_spec_and_flag) {
    setup();
    char *d = vdt_tmpdir("vdnn-train-bf16");
    char s16[700], s32[700], ck[4][760], a[3000], *out;
    snprintf(s16, sizeof s16, "%s/res16.yaml", d);
    snprintf(s32, sizeof s32, "%s/res32.yaml", d);
    write_res_spec(s16, "bf16");
    write_res_spec(s32, "fp32");
    /* 0: spec bf16; 1: spec fp32 --math bf16; 2: spec fp32; 3: spec bf16 --math fp32 */
    const char *specs[4] = {s16, s32, s32, s16}, *flags[4] = {"", "--math bf16", "", "--math fp32"};
    for (int k = 0; k < 4; k++) {
        snprintf(ck[k], sizeof ck[k], "%s/ck%d.safetensors", d, k);
        snprintf(a, sizeof a, "%s --backend cpu --data synthetic:64,16 --iters 3 --deterministic "
                 "--eval-every -1 --quiet --save %s %s", specs[k], ck[k], flags[k]);
        int rc = vdt_run_bin(g_bin, a, true, &out);
        ck_assert_msg(rc == 0, "vdnn-train %s: exit %d:\n%s", a, rc, out);
        vd_free(out);
    }
    vdt_assert_same_file(ck[0], ck[1]);
    vdt_assert_same_file(ck[2], ck[3]);
    ck_assert_msg(!same_bytes(ck[0], ck[2]), "math bf16 and fp32 trained the same bytes");
    /* math: fp8 is a spec error at the value (exit 3), whatever --math says */
    char s8[700], spec_err[800];
    snprintf(s8, sizeof s8, "%s/res8.yaml", d);
    write_res_spec(s8, "fp8");
    int col = (int)(strstr(RES_SPEC, "math: %s") - strstr(RES_SPEC, "train:")) + 7;
    snprintf(spec_err, sizeof spec_err, "%s:3:%d: 'math' must be fp32, tf32, bf16 or fp16", s8, col);
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof a, "%s --backend cpu --iters 1 %s", s8, k ? "--math bf16" : "");
        int rc = vdt_run_bin(g_bin, a, true, &out);
        ck_assert_msg(rc == VD_ESPEC && strstr(out, spec_err), "exit %d, want 3 and '%s':\n%s", rc,
                      spec_err, out);
        vd_free(out);
    }

    /* profiles: one of each math, and an fp32 one without the "math" key */
    char p32[700], p16[700], pold[700];
    snprintf(p32, sizeof p32, "%s/p32.json", d);
    snprintf(p16, sizeof p16, "%s/p16.json", d);
    snprintf(pold, sizeof pold, "%s/pold.json", d);
    const char *const outs[2] = {p32, p16}, *const outspec[2] = {s32, s16};
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof a, "%s --backend cpu --data synthetic:64,16 --iters 1 --eval-every -1 "
                 "--quiet --profile-out %s", outspec[k], outs[k]);
        ck_assert_int_eq(vdt_run_bin(g_bin, a, true, &out), 0);
        vd_free(out);
    }
    size_t n;
    char *text = vdt_slurp(p32, &n);
    char *m = strstr(text, "\"math\": \"fp32\",");
    ck_assert_msg(m, "%s records no math:\n%s", p32, text);
    memmove(m, m + 15, strlen(m + 15) + 1);
    tu_write(pold, text, strlen(text));
    vd_free(text);
    text = vdt_slurp(p16, &n);
    ck_assert_msg(strstr(text, "\"math\": \"bf16\""), "%s records no bf16:\n%s", p16, text);
    vd_free(text);
    struct { const char *spec, *flag, *prof; int rc; const char *want; } cases[] = {
        {s16, "", p32, VD_EDATA, "profile was made for math fp32, the run is bf16; re-profile "
                                 "with --math bf16"},
        {s32, "--math bf16", p32, VD_EDATA, "made for math fp32, the run is bf16"},
        {s32, "", p16, VD_EDATA, "profile was made for math bf16, the run is fp32"},
        {s16, "--math fp32", p16, VD_EDATA, "made for math bf16, the run is fp32"},
        {s16, "", pold, VD_EDATA, "made for math fp32 (no \"math\" key), the run is bf16"},
        {s16, "", p16, 0, "(loaded"},
        {s32, "", p32, 0, "(loaded"},
        {s32, "", pold, 0, "(loaded"},
    };
    for (size_t k = 0; k < VD_ARRAY_LEN(cases); k++)
        for (int tool = 0; tool < 2; tool++) {
            if (tool)
                snprintf(a, sizeof a, "%s --backend cpu --profile %s %s", cases[k].spec,
                         cases[k].prof, cases[k].flag);
            else
                snprintf(a, sizeof a, "%s --backend cpu --data synthetic:64,16 --iters 1 "
                         "--eval-every -1 --profile %s %s", cases[k].spec, cases[k].prof,
                         cases[k].flag);
            int rc = vdt_run_bin(tool ? g_plan : g_bin, a, true, &out);
            const char *want = tool && !cases[k].rc ? "" : cases[k].want;
            ck_assert_msg(rc == cases[k].rc && strstr(out, want), "%s %s: exit %d, want %d and "
                          "'%s':\n%s", tool ? "vdnn-plan" : "vdnn-train", a, rc, cases[k].rc,
                          want, out);
            vd_free(out);
        }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* --math fp16 (the CPU backend's oracle of it): N iterations, save, resume,
 * M more equal N + M in one run, byte for byte, under policy all; FILE.state
 * records the loss scale (65536 after 9 clean steps: the growth counter 9,
 * nothing skipped), the progress lines, the report and --metrics show it.
 * An fp32 checkpoint resumed in fp16 starts at the initial scale, saying
 * so; an fp16 one resumed in fp32 says its scale is dropped. */
START_TEST(fp16_resume_and_loss_scale) {
    setup();
    char *d = vdt_tmpdir("vdnn-train-fp16");
    char args[3000], a[700], b[700], c[700], f32[700], met[700], bs[760], cs[760], *out;
    snprintf(a, sizeof a, "%s/a.safetensors", d);
    snprintf(b, sizeof b, "%s/b.safetensors", d);
    snprintf(c, sizeof c, "%s/c.safetensors", d);
    snprintf(f32, sizeof f32, "%s/f32.safetensors", d);
    snprintf(met, sizeof met, "%s/m.jsonl", d);
    const char *common = "--data synthetic:200,48 --batch 16 --policy all --deterministic "
                         "--log-every 3 --math fp16 --eval-every -1";
    snprintf(args, sizeof args, "%%s %s --iters 9 --save %s --metrics %s", common, c, met);
    ck_assert_int_eq(run(&out, args), 0);
    ck_assert_msg(strstr(out, "iter 3/9") && strstr(out, "scale 65536  skipped 0") &&
                  strstr(out, "loss scaling (fp16): scale 65536 at the end, 0 steps skipped"),
                  "%s", out);
    vd_free(out);
    size_t n;
    char *text = vdt_slurp(met, &n);
    ck_assert_msg(strstr(text, "\"loss_scale\":65536") && strstr(text, "\"skipped_steps\":0"),
                  "%s", text);
    vd_free(text);
    snprintf(args, sizeof args, "%%s %s --iters 9 --stop-at 4 --save %s --quiet", common, a);
    expect(0, NULL, args);
    snprintf(args, sizeof args, "%%s %s --iters 9 --resume %s --save %s", common, a, b);
    expect(0, "resumed from", args);
    vdt_assert_same_file(b, c);
    snprintf(bs, sizeof bs, "%s.state", b);
    snprintf(cs, sizeof cs, "%s.state", c);
    vdt_assert_same_file(bs, cs);
    text = vdt_slurp(cs, &n);
    ck_assert_msg(strstr(text + 8, "\"loss_scale\":\"65536\"") &&
                  strstr(text + 8, "\"loss_scale_growth\":\"9\"") &&
                  strstr(text + 8, "\"loss_scale_skipped\":\"0\"") &&
                  strstr(text + 8, "\"loss_scale_stepped\":\"1\""), "%.600s", text + 8);
    vd_free(text);
    /* a loss scale far too high (the state edited in place, same length:
     * 1e30, halved 49 times still overflows binary16): 50 skipped steps in a
     * row end the run with exit 10 naming the layer where the overflow
     * began (fc3, the last with weights), and nothing is saved */
    char x[700], xs[760], y[700];
    snprintf(x, sizeof x, "%s/x.safetensors", d);
    snprintf(xs, sizeof xs, "%s.state", x);
    snprintf(y, sizeof y, "%s/y.safetensors", d);
    text = vdt_slurp(c, &n);
    tu_write(x, text, n);
    vd_free(text);
    text = vdt_slurp(cs, &n);
    char *at = strstr(text + 8, "\"loss_scale\":\"65536\"");
    ck_assert_ptr_nonnull(at);
    memcpy(at + 14, "1e+30", 5);
    tu_write(xs, text, n);
    vd_free(text);
    snprintf(args, sizeof args, "%%s %s --iters 200 --resume %s --save %s", common, x, y);
    expect(VD_ENUMERIC, "iteration 59: math fp16: the gradients overflowed in 50 steps in a row",
           args);
    expect(VD_ENUMERIC, "the first layer whose gradient was not finite: 'fc3'", args);
    ck_assert_msg(access(y, F_OK) != 0, "%s was saved after the overflow", y);
    /* across maths */
    snprintf(args, sizeof args, "%%s --data synthetic:200,48 --batch 16 --iters 3 --eval-every -1 "
             "--quiet --save %s", f32);
    expect(0, NULL, args);
    snprintf(args, sizeof args, "%%s %s --iters 5 --resume %s", common, f32);
    expect(0, "has no loss scale (saved by a run in another math): math fp16 starts at the "
           "initial scale 65536", args);
    snprintf(args, sizeof args, "%%s --data synthetic:200,48 --batch 16 --iters 5 --eval-every -1 "
             "--resume %s", c);
    expect(0, "was saved in math fp16: its loss scale (65536) is dropped in math fp32", args);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* "D/NAME" exists (lstat)? */
static bool exists_in(const char *d, const char *name) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", d, name);
    return access(p, F_OK) == 0;
}

/* --save-every --keep, --save-best and --early-stop against a reference run
 * that keeps every numbered checkpoint and logs every evaluation: the early
 * stop and the best iteration computed here from the reference's
 * accuracies, the files compared byte for byte with the reference's
 * checkpoints of those iterations; rotation removes only what the run
 * wrote; a run in two pieces (--stop-at, --resume) stops where the whole
 * run does, with the same bytes. */
START_TEST(keep_best_and_early_stop) {
    setup();
    char *d = vdt_tmpdir("vdnn-train-keep");
    ck_assert_int_eq(chdir(d), 0);
    enum { EVERY = 2, ITERS = 24, PATIENCE = 3 };
    /* accuracies (of 32 images) that rise, repeat and fall: the best is not
     * the first evaluation, and an equal one is no improvement */
    const char *common = "--backend cpu --data synthetic:128,32 --batch 8 --lr 0.02 --seed 1 "
                         "--iters 24 --eval-every 2 --quiet";
    char args[1600];
    /* the reference: every periodic checkpoint kept, every evaluation logged;
     * it tracks the best evaluation too (an early stop it never reaches), so
     * that its checkpoints can be resumed as a piece of the run below */
    snprintf(args, sizeof args, "%%s %s --save r.safetensors --save-every %d --keep 1000 "
             "--metrics r.jsonl --early-stop 1000", common, EVERY);
    expect(0, NULL, args);
    size_t n;
    char *log = vdt_slurp("r.jsonl", &n);
    double acc[ITERS / EVERY];
    int64_t at[ITERS / EVERY];
    int ne = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, 0, NULL);
        ck_assert_msg(j, "%s", line);
        if (!strcmp(json_string_value(json_object_get(j, "event")), "eval")) {
            ck_assert_int_lt(ne, ITERS / EVERY);
            at[ne] = json_integer_value(json_object_get(j, "iteration"));
            acc[ne++] = json_real_value(json_object_get(j, "accuracy"));
        }
        json_decref(j);
    }
    vd_free(log);
    ck_assert_int_eq(ne, ITERS / EVERY);   /* every EVERY, the last one the final one */
    /* the rule (vdnn-train(1)): an improvement is a higher accuracy than every
     * earlier one; stop after PATIENCE evaluations in a row without one */
    int64_t stop = 0, best_at = 0;
    double best = -1;
    for (int k = 0, since = 0; k < ne && !stop; k++) {
        if (acc[k] > best) { best = acc[k]; best_at = at[k]; since = 0; }
        else if (++since >= PATIENCE && at[k] < ITERS) stop = at[k];
    }
    /* the setting must exercise an early stop after rotation began */
    ck_assert_msg(stop > 3 * EVERY && best_at > EVERY, "no early stop after rotation began, or "
                  "the best is the first evaluation (stop %lld, best %lld)", (long long)stop,
                  (long long)best_at);
    /* a user's files that merely look numbered: none is the run's */
    static const char *const mine[] = { "x-100.safetensors", "x-3.safetensors",
                                        "x-0004.safetensors", "x-4.safetensors.bak" };
    for (size_t i = 0; i < VD_ARRAY_LEN(mine); i++) tu_write(mine[i], "mine", 4);
    char *out;
    snprintf(args, sizeof args, "%%s %s --save x.safetensors --save-every %d --keep 2 "
             "--save-best --early-stop %d", common, EVERY, PATIENCE);
    ck_assert_int_eq(run(&out, args), 0);
    char want[200];
    snprintf(want, sizeof want, "early stop at iteration %lld of %d: %d evaluations in a row",
             (long long)stop, ITERS, PATIENCE);
    ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
    snprintf(want, sizeof want, "at iteration %lld, saved as x-best.safetensors",
             (long long)best_at);
    ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
    vd_free(out);
    char a[100], b[100];
    /* the end's checkpoint is the weights at the stop, the best one those of
     * the best evaluation (the model files: the same bytes as the reference's) */
    snprintf(a, sizeof a, "r-%lld.safetensors", (long long)stop);
    vdt_assert_same_file("x.safetensors", a);
    snprintf(a, sizeof a, "r-%lld.safetensors", (long long)best_at);
    vdt_assert_same_file("x-best.safetensors", a);
    /* numbered: written at EVERY .. stop - EVERY (the stop is --save's), the
     * two newest kept */
    for (int64_t i = EVERY; i <= ITERS; i += EVERY) {
        snprintf(a, sizeof a, "x-%lld.safetensors", (long long)i);
        snprintf(b, sizeof b, "x-%lld.safetensors.state", (long long)i);
        bool kept = i < stop && i >= stop - 2 * EVERY;
        ck_assert_msg(exists_in(".", a) == kept && exists_in(".", b) == kept, "%s: %s", a,
                      kept ? "missing" : "not removed");
        if (kept) {
            snprintf(b, sizeof b, "r-%lld.safetensors", (long long)i);
            vdt_assert_same_file(a, b);
        }
    }
    for (size_t i = 0; i < VD_ARRAY_LEN(mine); i++) {
        char *m = vdt_slurp(mine[i], &n);
        ck_assert_msg(n == 4 && !memcmp(m, "mine", 4), "%s changed", mine[i]);
        vd_free(m);
    }
    /* in two pieces: the first ends at the evaluation before the stop, its
     * checkpoint (written again after that evaluation, to record it) the
     * reference's of that iteration; the second resumes it */
    snprintf(args, sizeof args, "%%s %s --stop-at %lld --save y.safetensors --early-stop %d",
             common, (long long)(stop - EVERY), PATIENCE);
    expect(0, NULL, args);
    snprintf(a, sizeof a, "r-%lld.safetensors", (long long)(stop - EVERY));
    vdt_assert_same_file("y.safetensors", a);
    snprintf(a, sizeof a, "r-%lld.safetensors.state", (long long)(stop - EVERY));
    vdt_assert_same_file("y.safetensors.state", a);
    snprintf(args, sizeof args, "%%s %s --resume y.safetensors --save y.safetensors "
             "--save-best --early-stop %d", common, PATIENCE);
    expect(0, "early stop at iteration", args);
    vdt_assert_same_file("y.safetensors", "x.safetensors");
    vdt_assert_same_file("y.safetensors.state", "x.safetensors.state");
    ck_assert(!exists_in(".", "y-best.safetensors"));   /* no improvement after the resume */
    /* resumed again with the same patience: that run stopped, so does this */
    snprintf(args, sizeof args, "%%s %s --resume y.safetensors --save z.safetensors "
             "--early-stop %d", common, PATIENCE);
    snprintf(want, sizeof want, "no training iterations ran (at iteration %lld)\nearly stop at "
             "iteration %lld", (long long)stop, (long long)stop);
    expect(0, want, args);
    vdt_assert_same_file("z.safetensors", "x.safetensors");
    ck_assert_int_eq(chdir("/"), 0);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* --val-split on a folder without val/, through the CLI: 9 of its 30
 * images held out, all 9 evaluated at batch 4 (the last batch one image and
 * three of padding), top-1 and top-5 reported; the progress lines carry the
 * epoch and the training accuracy; a resume without --data continues on
 * the recorded data and split. Bad --val-split: exit 2 with the reason. */
START_TEST(val_split_and_full_evaluation) {
    setup();
    char *d = vdt_tmpdir("vdnn-train-test");
    char args[2400], ck[700];
    tu_class_folder(d, 16);
    snprintf(ck, sizeof ck, "%s/ck.safetensors", d);
    char *out;
    snprintf(args, sizeof args, "%%s --backend cpu --data folder:%s --val-split 0.3 --batch 4 "
             "--iters 6 --log-every 3 --save %s", d, ck);
    int rc = run(&out, args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "21 train, 9 val held out by --val-split 0.3") &&
                  strstr(out, "epoch 1/2  iter 3/6") && strstr(out, "epoch 2/2  iter 6/6") &&
                  strstr(out, "  acc ") && strstr(out, "top-5 ") &&
                  strstr(out, "(9 held-out images)"), "%s", out);
    vd_free(out);
    snprintf(args, sizeof args, "%%s --backend cpu --batch 4 --iters 7 --resume %s", ck);
    rc = run(&out, args);
    ck_assert_msg(rc == 0 && strstr(out, "with --val-split 0.3") &&
                  strstr(out, "(9 held-out images)"), "exit %d:\n%s", rc, out);
    vd_free(out);
    snprintf(args, sizeof args, "%%s --data folder:%s --val-split 0.01", d);
    expect(2, "each split needs at least one image", args);
    expect(2, "between 0 and 1", "%s --val-split 0");
    expect(2, "between 0 and 1", "%s --val-split 1");
    expect(2, "not a number", "%s --val-split half");
    expect(2, "has a held-out split of its own", "%s --data synthetic:64,16 --val-split 0.5");
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

VDT_MAIN("cli", 300,
          usage_errors_exit_2, other_exit_codes, help_lists_every_flag, resume_through_the_cli,
          interrupted_save_and_recorded_data, bf16_checkpoints_any_policy, math_spec_and_flag,
          fp16_resume_and_loss_scale, keep_best_and_early_stop, val_split_and_full_evaluation)
