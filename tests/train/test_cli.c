/* test_cli.c — vdnn-train as a program: exit codes, --help, resume through
 * the CLI. Runs $VD_BUILDDIR/vdnn-train on $VD_SRCDIR/nets/lenet.yaml. */
#include "tutil.h"
#include "vd_config.h"
#include "backend/backend.h"
#include "spec/spec.h"
#include "train/ckpt.h"

static char g_bin[1024], g_net[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_bin, sizeof g_bin, "%s/vdnn-train", b);
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
    expect(2, "--math", "%s --math fp16");
    expect(2, "needs a value", "%s --iters");
    expect(2, "takes no value", "%s --quiet=1");
    expect(2, "exclude", "%s --resume a --init b");
    expect(2, "--save-every needs --save", "%s --save-every 5");
    expect(2, "--save-dtype needs --save", "%s --save-dtype bf16");
    expect(2, "did you mean 'bf16'", "%s --save x.safetensors --save-dtype bf61");
    expect(2, "expected f32 | bf16", "%s --save x.safetensors --save-dtype f16");
    expect(2, "exclude", "%s --profile p.json --analytic-profile");
    expect(2, "--budget", "%s --budget 12Q");
    expect(2, "one NET.yaml", "%s other.yaml");
    expect(2, "unknown data kind", "%s --data mnst:x");
    expect(2, "expects input", "%s --data cifar10:/nonexistent");
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
        "--sync-debug", "--step-times", "--mem-trace" };
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

VDT_MAIN("cli", 300,
          usage_errors_exit_2, other_exit_codes, help_lists_every_flag, resume_through_the_cli,
          interrupted_save_and_recorded_data)
