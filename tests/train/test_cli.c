/* test_cli.c — vdnn-train as a program: exit codes, --help, resume through
 * the CLI. Runs $VD_BUILDDIR/vdnn-train on $VD_SRCDIR/nets/lenet.yaml. */
#include "tutil.h"
#include "vd_config.h"
#include "backend/backend.h"

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
    free(out);
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
    if (!vd_backend_cuda_available())
        expect(VD_HAVE_CUDA ? VD_EDEVICE : VD_EUNSUPPORTED, NULL,
               "%s --backend cuda --data synthetic:64,16 --iters 1");
    char *out;
    ck_assert_int_eq(run(&out, "--version"), 0);
    ck_assert_msg(strstr(out, "vdnn-train " VD_VERSION), "%s", out);
    free(out);
    vdt_rmrf(d);
    free(d);
}
END_TEST

START_TEST(help_lists_every_flag) {
    setup();
    char *out;
    ck_assert_int_eq(run(&out, "--help"), 0);
    static const char *const flags[] = {
        "--batch", "--iters", "--epochs", "--stop-at", "--lr", "--momentum", "--wd", "--seed",
        "--data", "--augment", "--loader-threads", "--save", "--save-every", "--resume",
        "--init", "--backend", "--device", "--budget", "--policy", "--prefetch", "--profile",
        "--profile-out", "--analytic-profile", "--math", "--deterministic", "--poison", "--eval-every",
        "--log-every", "--quiet", "--help", "--version" };
    for (size_t i = 0; i < VD_ARRAY_LEN(flags); i++)
        ck_assert_msg(strstr(out, flags[i]), "--help does not mention %s", flags[i]);
    free(out);
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
    free(out);
    snprintf(args, sizeof args, "%%s %s --iters 9 --stop-at 4 --save %s --quiet", common, a);
    ck_assert_int_eq(run(&out, args), 0);
    ck_assert_msg(strstr(out, "iter ") == NULL, "--quiet printed progress:\n%s", out);
    free(out);
    snprintf(args, sizeof args, "%%s %s --iters 9 --resume %s --save %s", common, a, b);
    ck_assert_int_eq(run(&out, args), 0);
    ck_assert_msg(strstr(out, "resumed from"), "%s", out);
    free(out);
    vdt_assert_same_file(b, c);
    snprintf(as, sizeof as, "%s.state", a);
    snprintf(bs, sizeof bs, "%s.state", b);
    snprintf(cs, sizeof cs, "%s.state", c);
    vdt_assert_same_file(bs, cs);
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
    free(spec);
    snprintf(args, sizeof args, "%s %s --iters 2 --init %s", wide, common, b);
    expect(5, "conv1.weight", args);
    vdt_rmrf(d);
    free(d);
}
END_TEST

VDT_MAIN("cli", 300,
          usage_errors_exit_2, other_exit_codes, help_lists_every_flag, resume_through_the_cli)
