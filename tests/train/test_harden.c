/* test_harden.c — hostile and careless use of the tools: stop
 * signals save, data errors keep the last good checkpoint, stale temporaries
 * of killed saves are removed, readers refuse what is not a regular file,
 * nesting and image size limits, --metrics. Runs $VD_BUILDDIR/vdnn-train and
 * vdnn-plan on $VD_SRCDIR/nets/lenet.yaml. */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <jansson.h>
#include "tutil.h"
#include "util/util.h"
#include "spec/spec.h"
#include "train/ckpt.h"

static char g_train[1024], g_plan[1024], g_net[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_train, sizeof g_train, "%s/vdnn-train", b);
    snprintf(g_plan, sizeof g_plan, "%s/vdnn-plan", b);
    snprintf(g_net, sizeof g_net, "%s/nets/lenet.yaml", s);
}

/* Run bin with args (through the shell); exit status, output in *out. */
static int run(const char *bin, char **out, const char *args) {
    return vdt_run_bin(bin, args, true, out);
}

static bool exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

/* ---- 1. never lose progress ----------------------------------------------- */

/* Start vdnn-train in the background (output to log), wait until it prints
 * that training started, send sig, and return its exit status. */
static int train_and_signal(const char *args, const char *log, int sig) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "exec '%s' %s >'%s' 2>&1", g_train, args, log);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    bool started = false;
    for (int i = 0; i < 1200 && !started; i++) {        /* up to 60 s of setup */
        usleep(50000);
        FILE *f = fopen(log, "r");
        if (!f) continue;
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strstr(line, "iter 2/")) started = true;   /* in the loop, handler installed */
        fclose(f);
    }
    ck_assert_msg(started, "vdnn-train %s never reached iteration 2", args);
    ck_assert_int_eq(kill(pid, sig), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st), "vdnn-train died of signal %d instead of saving",
                  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return WEXITSTATUS(st);
}

START_TEST(stop_signals_save_then_exit_128_plus_signal) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    const int sigs[] = { SIGTERM, SIGHUP, SIGINT };
    const char *names[] = { "SIGTERM", "SIGHUP", "SIGINT" };
    for (int k = 0; k < 3; k++) {
        char ck[600], args[2000], log[700], *out;
        snprintf(ck, sizeof ck, "%s/ck%d.safetensors", d, k);
        snprintf(log, sizeof log, "%s/log%d", d, k);
        snprintf(args, sizeof args, "'%s' --data synthetic:256,64 --batch 8 --iters 100000000 "
                 "--log-every 1 --eval-every -1 --save '%s'", g_net, ck);
        int rc = train_and_signal(args, log, sigs[k]);
        size_t n;
        out = vdt_slurp(log, &n);
        ck_assert_msg(rc == 128 + sigs[k], "%s: exit %d, expected %d:\n%s", names[k], rc,
                      128 + sigs[k], out);
        char want[64];
        snprintf(want, sizeof want, "interrupted by %s", names[k]);
        ck_assert_msg(strstr(out, want) && strstr(out, "checkpoint saved)"), "%s", out);
        free(out);
        /* the checkpoint is there and resumes */
        char st[700];
        snprintf(st, sizeof st, "%s.state", ck);
        ck_assert_msg(exists(ck) && exists(st), "%s: no checkpoint %s", names[k], ck);
        snprintf(args, sizeof args, "--resume '%s' --iters 100000000 --stop-at 1 --quiet", ck);
        char a2[2600];
        snprintf(a2, sizeof a2, "'%s' %s", g_net, args);
        rc = run(g_train, &out, a2);
        ck_assert_msg(rc == 0 && strstr(out, "no training iterations ran (at iteration"),
                      "resume: exit %d:\n%s",
                      rc, out);
        free(out);
    }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

static void write_pgm(const char *path, unsigned char v) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "P5\n28 28\n255\n");
    for (int i = 0; i < 28 * 28; i++) fputc(v, f);
    fclose(f);
}

/* A data error met in training (an image that passes the check at open and
 * fails to decode) saves the last good checkpoint first; exit 5. */
START_TEST(data_error_later_keeps_last_checkpoint) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char p[700], args[2000], ck[700], *out;
    const char *dirs[] = { "train", "train/a", "train/b" };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", d, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0755), 0);
    }
    for (int i = 0; i < 16; i++) {
        snprintf(p, sizeof p, "%s/train/%s/%02d.pgm", d, i % 2 ? "a" : "b", i);
        write_pgm(p, (unsigned char)(i * 13));
    }
    /* whole, with a bad CRC: it passes the check at open (lengths), its
     * decode fails (the CRCs are checked on the bytes decoded) */
    snprintf(p, sizeof p, "%s/train/a/crc.png", d);
    tu_write_png4(p, true);
    snprintf(ck, sizeof ck, "%s/ck.safetensors", d);
    /* 17 images, batch 2, loader on this thread: the bad PNG is met in the
     * first epoch; seed 1 puts it in the 9th batch (at least past the first: checked below) */
    snprintf(args, sizeof args, "'%s' --data folder:%s --batch 2 --iters 50 --seed 1 "
             "--loader-threads 1 --log-every 1 --save '%s'", g_net, d, ck);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 5, "exit %d, expected 5:\n%s", rc, out);
    ck_assert_msg(strstr(out, "crc.png: corrupt PNG: the CRC of the IDAT chunk"), "%s", out);
    const char *s = strstr(out, "saved the last good checkpoint");
    ck_assert_msg(s, "no checkpoint saved before the data error:\n%s", out);
    long long at = -1;
    ck_assert_int_eq(sscanf(strstr(s, "at iteration"), "at iteration %lld", &at), 1);
    ck_assert_msg(at >= 1, "%s", out);
    /* the last progress line before the error is that iteration */
    char want[64];
    snprintf(want, sizeof want, "iter %lld/50", at);
    ck_assert_msg(strstr(out, want), "%s", out);
    snprintf(want, sizeof want, "iter %lld/50", at + 1);
    ck_assert_msg(!strstr(out, want), "%s", out);
    free(out);
    ck_assert(exists(ck));
    /* resuming it starts at that iteration (and fails on the same image) */
    snprintf(args, sizeof args, "'%s' --resume '%s' --iters 50", g_net, ck);
    rc = run(g_train, &out, args);
    snprintf(want, sizeof want, "resumed from %s at iteration %lld", ck, at);
    ck_assert_msg(rc == 5 && strstr(out, want), "exit %d:\n%s", rc, out);
    free(out);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(folder_headers_checked_at_open) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char p[700], args[2000], *out;
    snprintf(p, sizeof p, "%s/train", d); ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/train/a", d); ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/train/a/ok.pgm", d); write_pgm(p, 7);
    /* a PNG header promising 18000 x 18000 RGB pixels (324 M > the 134 M limit) */
    static const unsigned char big[] = {
        0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A,
        0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0x46, 0x50, 0, 0, 0x46, 0x50, 8, 2, 0, 0, 0,
        0, 0, 0, 0 };
    snprintf(p, sizeof p, "%s/train/a/huge.png", d);
    tu_write(p, big, sizeof big);
    snprintf(args, sizeof args, "'%s' --data folder:%s --iters 1", g_net, d);
    double t0 = vd_now();
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 5 && strstr(out, "huge.png: 18000 x 18000 pixels, more than"),
                  "exit %d:\n%s", rc, out);
    /* rejected from the header: no 1.2 GB decode (a generous bound for a
     * loaded machine; decoding would take tens of seconds) */
    ck_assert_msg(vd_now() - t0 < 20, "took %.1f s", vd_now() - t0);
    free(out);
    unlink(p);
    snprintf(p, sizeof p, "%s/train/a/junk.jpg", d);
    tu_write(p, "hello, not an image", 19);
    rc = run(g_train, &out, args);
    ck_assert_msg(rc == 5 && strstr(out, "junk.jpg: not a JPEG, PNG"), "exit %d:\n%s", rc, out);
    free(out);
    unlink(p);
    /* a 40 x 30 BMP cut to 60 bytes would train on made-up pixels
     * (stb_image reads zeros past the end): its pixel array is measured
     * against the file at open */
    unsigned char bmp[54 + 120 * 30] = { 'B', 'M' };
    static const unsigned char hdr[] = { 54, 0, 0, 0, 40, 0, 0, 0, 40, 0, 0, 0, 30, 0, 0, 0,
                                         1, 0, 24, 0 };
    memcpy(bmp + 10, hdr, sizeof hdr);
    snprintf(p, sizeof p, "%s/train/a/cut.bmp", d);
    tu_write(p, bmp, sizeof bmp);
    rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0, "the whole BMP: exit %d:\n%s", rc, out);
    free(out);
    tu_write(p, bmp, 60);
    rc = run(g_train, &out, args);
    ck_assert_msg(rc == 5 && strstr(out, "cut.bmp: truncated BMP: 40 x 30 pixels of 24 bits"),
                  "exit %d:\n%s", rc, out);
    free(out);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* A pid that no process has: a child that has exited and been reaped. */
static pid_t dead_pid(void) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) _exit(0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    ck_assert(kill(pid, 0) != 0 && errno == ESRCH);
    return pid;
}

START_TEST(stale_temporaries_removed_by_next_save) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char ck[600], p[800], args[2000], *out;
    snprintf(ck, sizeof ck, "%s/ck.safetensors", d);
    long dead = (long)dead_pid(), live = (long)getpid();
    const char *suffix[] = { "", ".state", ".state.prev" };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s.tmp.%ld", ck, suffix[i], dead);
        tu_write(p, "stale", 5);
    }
    snprintf(p, sizeof p, "%s.tmp.%ld", ck, live);      /* a save in progress elsewhere */
    tu_write(p, "live", 4);
    snprintf(p, sizeof p, "%s.tmp.%ldx", ck, dead);     /* not the pattern */
    tu_write(p, "other", 5);
    snprintf(p, sizeof p, "%s/other.tmp.%ld", d, dead); /* another file's */
    tu_write(p, "other", 5);
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 1 --quiet "
             "--save '%s'", g_net, ck);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s.tmp.%ld", ck, suffix[i], dead);
        ck_assert_msg(!exists(p), "%s is still there", p);
    }
    snprintf(p, sizeof p, "%s.tmp.%ld", ck, live);
    ck_assert_msg(exists(p), "the live process's %s was removed", p);
    snprintf(p, sizeof p, "%s.tmp.%ldx", ck, dead);
    ck_assert(exists(p));
    snprintf(p, sizeof p, "%s/other.tmp.%ld", d, dead);
    ck_assert(exists(p));
    /* the library function itself: exactly the dead one */
    snprintf(p, sizeof p, "%s/x.json.tmp.%ld", d, dead);
    tu_write(p, "stale", 5);
    snprintf(p, sizeof p, "%s/x.json", d);
    ck_assert_int_eq(vd_tmp_clean_stale(p), 1);
    ck_assert_int_eq(vd_tmp_clean_stale(p), 0);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- 2. bounded reads ------------------------------------------------------- */

/* bin ARGS must exit with code within a few seconds, saying want. */
static void expect_quick(const char *bin, int code, const char *want, const char *args) {
    char *out;
    double t0 = vd_now();
    char a[2200];
    /* timeout: a blocking read (FIFO) or an endless one (/dev/zero) fails
     * the test instead of hanging it */
    snprintf(a, sizeof a, "%s", args);
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "10 '%s' %s", bin, a);
    int rc = vdt_run_bin("timeout", cmd, true, &out);
    double dt = vd_now() - t0;
    ck_assert_msg(rc == code, "%s %s: exit %d, expected %d:\n%s", bin, args, rc, code, out);
    ck_assert_msg(strstr(out, want), "%s %s: no '%s' in:\n%s", bin, args, want, out);
    /* "within a second" on an idle machine; 5 s for a loaded test machine */
    ck_assert_msg(dt < 5, "%s %s took %.1f s", bin, args, dt);
    free(out);
}

START_TEST(readers_refuse_what_is_not_a_regular_file) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char fifo[600], args[2000];
    snprintf(fifo, sizeof fifo, "%s/fifo", d);
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    expect_quick(g_plan, 4, "/dev/zero: not a regular file (a character device)", "/dev/zero");
    snprintf(args, sizeof args, "'%s'", fifo);
    expect_quick(g_plan, 4, "fifo: not a regular file (a FIFO)", args);
    snprintf(args, sizeof args, "'%s'", d);
    expect_quick(g_plan, 4, "is a directory", args);
    snprintf(args, sizeof args, "'%s' --profile /dev/zero", g_net);
    expect_quick(g_plan, 4, "/dev/zero: not a regular file", args);
    snprintf(args, sizeof args, "'%s' --profile '%s'", g_net, d);
    expect_quick(g_plan, 4, "is a directory", args);
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 0 --init /dev/zero",
             g_net);
    expect_quick(g_train, 4, "/dev/zero: not a regular file", args);
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 0 --init '%s'",
             g_net, fifo);
    expect_quick(g_train, 4, "not a regular file (a FIFO)", args);
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 3 --resume '%s'",
             g_net, d);
    expect_quick(g_train, 4, "is a directory", args);
    snprintf(args, sizeof args, "'%s' --data mnist:/dev --iters 1", g_net);
    expect_quick(g_train, 4, "/dev/train-images-idx3-ubyte", args);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(yaml_nesting_limit) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char p[600], args[700];
    snprintf(p, sizeof p, "%s/deep.yaml", d);
    size_t n = 100000;
    char *t = malloc(n + 16);
    ck_assert_ptr_nonnull(t);
    memcpy(t, "name: [", 7);
    memset(t + 7, '[', n - 1);
    tu_write(p, t, n + 6);
    free(t);
    snprintf(args, sizeof args, "'%s'", p);
    /* the root mapping is level 1, so the 64th '[' (column 6 + 64) is level 65 */
    expect_quick(g_plan, 3, "deep.yaml:1:70: collections nested more than 64 deep", args);
    /* 64 levels are fine as far as nesting goes (the spec is still wrong) */
    t = malloc(256);
    ck_assert_ptr_nonnull(t);
    memcpy(t, "name: ", 6);
    memset(t + 6, '[', 63);
    memset(t + 69, ']', 63);
    tu_write(p, t, 132);
    free(t);
    char *out;
    int rc = run(g_plan, &out, args);
    ck_assert_msg(rc == 3 && !strstr(out, "nested more than"), "exit %d:\n%s", rc, out);
    free(out);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(metrics_json_lines) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char m[600], args[2000], *out;
    snprintf(m, sizeof m, "%s/m.jsonl", d);
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 6 --log-every 2 "
             "--eval-every 3 --metrics '%s'", g_net, m);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    size_t n;
    char *text = vdt_slurp(m, &n);
    /* progress after iterations 2, 4, 6; evaluations after 3 and at the end */
    const char *want_ev[] = { "progress", "eval", "progress", "progress", "eval" };
    const long long want_it[] = { 2, 3, 4, 6, 6 };
    int lines = 0;
    double last_loss = -1;
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        ck_assert_msg(nl, "the last record has no newline:\n%s", text);
        ck_assert_int_lt(lines, 5);
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)(nl - line), 0, &je);
        ck_assert_msg(o && json_is_object(o), "line %d is not a JSON object: %s", lines + 1, je.text);
        ck_assert_str_eq(json_string_value(json_object_get(o, "event")), want_ev[lines]);
        ck_assert_int_eq(json_integer_value(json_object_get(o, "iteration")), want_it[lines]);
        ck_assert_int_eq(json_integer_value(json_object_get(o, "total")), 6);
        ck_assert(json_is_real(json_object_get(o, "elapsed_s")));
        if (!strcmp(want_ev[lines], "progress")) {
            const char *keys[] = { "loss", "avg_loss", "train_accuracy", "lr", "images_per_s",
                                   "step_s", "data_wait_s" };
            for (int k = 0; k < 7; k++)
                ck_assert_msg(json_is_real(json_object_get(o, keys[k])), "line %d: no %s",
                              lines + 1, keys[k]);
            /* 64 images at batch 8: 8 iterations an epoch, so all in the first */
            ck_assert_int_eq(json_integer_value(json_object_get(o, "epoch")), 1);
            double ta = json_real_value(json_object_get(o, "train_accuracy"));
            ck_assert(ta >= 0 && ta <= 1);
            /* a step and a wait are durations: positive, and a step takes longer
             * than nothing (the wait may be 0 when a batch was ready) */
            ck_assert(json_real_value(json_object_get(o, "step_s")) > 0);
            ck_assert(json_real_value(json_object_get(o, "data_wait_s")) >= 0);
            /* lenet's lr: 0.01 as a float */
            ck_assert(json_real_value(json_object_get(o, "lr")) == (double)0.01f);
            last_loss = json_real_value(json_object_get(o, "loss"));
        } else {
            ck_assert(json_is_real(json_object_get(o, "accuracy")));
            ck_assert(json_real_value(json_object_get(o, "top5_accuracy")) >=
                      json_real_value(json_object_get(o, "accuracy")));
            ck_assert(json_is_real(json_object_get(o, "eval_loss")));
            ck_assert_int_eq(json_integer_value(json_object_get(o, "images")), 16);
            ck_assert(json_is_boolean(json_object_get(o, "final")));
        }
        json_decref(o);
        lines++;
    }
    ck_assert_int_eq(lines, 5);
    /* the last progress record's loss is the report's final loss (%.4f) */
    char want[64];
    snprintf(want, sizeof want, "final loss %.4f", last_loss);
    ck_assert_msg(strstr(out, want), "%s not in:\n%s", want, out);
    free(text);
    free(out);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- 3. outputs never destroy anything ------------------------------------- */

START_TEST(outputs_refuse_devices_fifos_dirs_and_follow_links) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char fifo[600], args[2000], link[600], target[600];
    snprintf(fifo, sizeof fifo, "%s/fifo", d);
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    const char *base = "--data synthetic:64,16 --batch 8 --iters 1 --quiet";
    snprintf(args, sizeof args, "'%s' %s --save /dev/full", g_net, base);
    expect_quick(g_train, 4, "/dev/full: not a regular file (a character device)", args);
    snprintf(args, sizeof args, "'%s' %s --save '%s'", g_net, base, fifo);
    expect_quick(g_train, 4, "not a regular file (a FIFO)", args);
    snprintf(args, sizeof args, "'%s' %s --save '%s'", g_net, base, d);
    expect_quick(g_train, 4, "is a directory", args);
    snprintf(args, sizeof args, "'%s' %s --metrics /dev/null", g_net, base);
    expect_quick(g_train, 4, "--metrics: /dev/null: not a regular file", args);
    snprintf(args, sizeof args, "'%s' %s --plan-json '%s'", g_net, base, fifo);
    expect_quick(g_train, 4, "--plan-json: ", args);
    snprintf(args, sizeof args, "'%s' --trace /dev/null", g_net);
    expect_quick(g_plan, 4, "/dev/null: not a regular file", args);
    snprintf(args, sizeof args, "'%s' --trace '%s'", g_net, fifo);
    expect_quick(g_plan, 4, "not a regular file (a FIFO)", args);
    struct stat st;
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));             /* still the device */
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    /* a symlink is written through; the link stays (a dangling one too) */
    snprintf(link, sizeof link, "%s/ck.link", d);
    snprintf(target, sizeof target, "%s/ck.safetensors", d);
    ck_assert_int_eq(symlink("ck.safetensors", link), 0);
    char *out;
    snprintf(args, sizeof args, "'%s' %s --save '%s'", g_net, base, link);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(target, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    char ts[700];
    snprintf(ts, sizeof ts, "%s.state", target);
    ck_assert(exists(ts));
    /* and resumed through the link: the state beside the target is found */
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --iters 2 --quiet --resume '%s' "
             "--save '%s'", g_net, link, link);
    rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0 && strstr(out, "iterations 1..2"), "exit %d:\n%s", rc, out);
    free(out);
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    /* vdnn-plan --trace through a link */
    snprintf(link, sizeof link, "%s/trace.link", d);
    snprintf(target, sizeof target, "%s/trace.json", d);
    ck_assert_int_eq(symlink(target, link), 0);
    snprintf(args, sizeof args, "'%s' --trace '%s'", g_net, link);
    rc = run(g_plan, &out, args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(target, &st), 0);
    ck_assert(S_ISREG(st.st_mode) && st.st_size > 0);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- 4. validation holes ------------------------------------------------------ */

START_TEST(flag_ranges_and_combinations) {
    setup();
    struct { const char *args, *want; } c[] = {
        { "--momentum 1", "--momentum: '1' must be in [0, 1)" },
        { "--momentum 5", "--momentum: '5' must be in [0, 1)" },
        { "--lr 0", "--lr: '0' must be positive" },
        { "--lr 1e31", "--lr: '1e31' must be positive" },
        { "--iters 5 --epochs 1", "--iters and --epochs exclude each other" },
        { "--iters 5 --stop-at 6", "--stop-at 6 is beyond the run's 5 iterations" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char args[1400], *out;
        snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 %s", g_net, c[i].args);
        int rc = run(g_train, &out, args);
        ck_assert_msg(rc == 2 && strstr(out, c[i].want), "%s: exit %d:\n%s", c[i].args, rc, out);
        free(out);
    }
    /* the edges that are fine */
    char args[1400], *out;
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --momentum 0.999 --lr 1e-9 "
             "--iters 2 --stop-at 2 --quiet", g_net);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* lenet's parameters from the spec, seed 1, with a checkpoint pair saved at
 * path with state st (momentum zero). */
static void save_lenet(const char *path, const vd_train_state *st, int nan_at_param) {
    vd_net net;
    vd_net_init(&net);
    vd_err e;
    ck_assert_msg(vd_spec_load(g_net, &net, &e) == 0, "%s", e.msg);
    float *p = calloc((size_t)net.param_floats, sizeof *p), *m = calloc((size_t)net.param_floats, sizeof *m);
    ck_assert(p && m);
    vd_net_init_params(&net, p, 1);
    if (nan_at_param >= 0) p[net.params[nan_at_param].offset + 3] = NAN;
    ck_assert_msg(vd_ckpt_save(path, &net, p, st ? m : NULL, st, &e) == 0, "%s", e.msg);
    free(p);
    free(m);
    vd_net_free(&net);
}

START_TEST(damaged_states_and_weights_exit_5) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char ck[600], args[2000], *out;
    snprintf(ck, sizeof ck, "%s/ck.safetensors", d);
    vd_train_state st = { .iteration = 2, .sgd_steps = 2, .samples = UINT64_MAX, .seed = 1,
                          .batch = 8 };
    snprintf(st.data, sizeof st.data, "synthetic:64,16");
    save_lenet(ck, &st, -1);
    snprintf(args, sizeof args, "'%s' --iters 4 --resume '%s'", g_net, ck);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 5 && strstr(out, "metadata 'samples' is 18446744073709551615"),
                  "exit %d:\n%s", rc, out);
    free(out);
    st.samples = 16;
    snprintf(st.data, sizeof st.data, "nonsense:xyz");
    save_lenet(ck, &st, -1);
    rc = run(g_train, &out, args);
    ck_assert_msg(rc == 5 && strstr(out, "the data spec recorded in") && strstr(out, ".state"),
                  "exit %d:\n%s", rc, out);
    free(out);
    /* NaN weights: --init and --resume refuse them, naming the tensor (lenet's
     * parameter 2 is conv2.weight) */
    snprintf(st.data, sizeof st.data, "synthetic:64,16");
    save_lenet(ck, &st, 2);
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 0 --init '%s'",
             g_net, ck);
    rc = run(g_train, &out, args);
    ck_assert_msg(rc == 5 && strstr(out, "tensor 'conv2.weight' holds NaN at element 3"),
                  "exit %d:\n%s", rc, out);
    free(out);
    snprintf(args, sizeof args, "'%s' --iters 4 --resume '%s'", g_net, ck);
    rc = run(g_train, &out, args);
    ck_assert_msg(rc == 5 && strstr(out, "tensor 'conv2.weight' holds NaN"), "exit %d:\n%s", rc, out);
    free(out);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(nan_error_counts_like_progress_lines) {
    setup();
    char args[1400], *out;
    snprintf(args, sizeof args, "'%s' --lr 1e30 --data synthetic:256,16 --iters 20 --batch 8 "
             "--log-every 1", g_net);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 10, "exit %d:\n%s", rc, out);
    const char *s = strstr(out, "loss became");
    ck_assert_ptr_nonnull(s);
    long long at = -1;
    ck_assert_int_eq(sscanf(strstr(s, "at iteration"), "at iteration %lld", &at), 1);
    /* iteration `at` (from 1) failed: the progress lines stop one before it */
    char want[64];
    snprintf(want, sizeof want, "iter %lld/20", at);
    ck_assert_msg(!strstr(out, want), "%s is both reported and failed:\n%s", want, out);
    if (at > 1) {
        snprintf(want, sizeof want, "iter %lld/20", at - 1);
        ck_assert_msg(strstr(out, want), "no %s:\n%s", want, out);
    }
    free(out);
}
END_TEST

/* Load the JSON at path, let edit change it, write it back. */
static void edit_json(const char *path, void (*edit)(json_t *root)) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    ck_assert_msg(root, "%s: %s", path, je.text);
    edit(root);
    ck_assert_int_eq(json_dump_file(root, path, JSON_INDENT(1)), 0);
    json_decref(root);
}
static json_t *layer_of(json_t *root, size_t i) {
    return json_array_get(json_object_get(root, "layers"), i);
}
static void grow_conv1(json_t *root) {           /* conv1: 6 -> 8 output channels */
    json_array_set_new(json_object_get(layer_of(root, 0), "shape"), 0, json_integer(8));
}
static void zero_loss_aux(json_t *root) {        /* lenet's loss (layer 11) keeps 8 bytes */
    json_object_set_new(layer_of(root, 11), "aux_bytes", json_integer(0));
}
static void small_conv1_ws(json_t *root) {       /* conv1's fastest option: 100 bytes */
    json_t *a = json_array_get(json_object_get(layer_of(root, 0), "algos"), 0);
    json_object_set_new(a, "workspace", json_integer(100));
    json_object_set_new(a, "fwd_workspace", json_integer(100));
    json_object_set_new(a, "bwd_workspace", json_integer(100));
}
static void relabel_conv1(json_t *root) {        /* conv1's options: other engines */
    json_t *algos = json_object_get(layer_of(root, 0), "algos");
    for (size_t k = 0; k < json_array_size(algos); k++)
        json_object_set_new(json_array_get(algos, k), "label", json_string(k ? "fft" : "winograd"));
}
static void drop_conv1(json_t *root) {           /* conv1's fastest option: another engine */
    json_t *a = json_array_get(json_object_get(layer_of(root, 0), "algos"), 0);
    json_object_set_new(a, "label", json_string("winograd"));
}

START_TEST(profiles_of_other_nets_or_setups) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char prof[600], args[2000], *out;
    snprintf(prof, sizeof prof, "%s/p.json", d);
    /* A workspace below this setup's need is planned with this setup's
     * (cuDNN's tuning picks another engine from one run to the next), with a
     * note, and so is an option of a label this setup does not offer;
     * a layer none of whose options this setup offers is another setup's
     * (exit 8). */
    void (*edits[])(json_t *) = { grow_conv1, zero_loss_aux, small_conv1_ws, drop_conv1,
                                  relabel_conv1 };
    const char *want[] = {
        "layers[0] 'conv1' was profiled with output 8x28x28 and 156 parameters, but in net "
        "'lenet' it has 6x28x28 and 156: the profile is of another net",
        "the profile gives layer 'loss' 0 bytes of saved state (\"aux_bytes\"), but the cpu "
        "backend needs 8",
        "note: the profile gives 1 option less workspace than this setup needs (up to 76.46 KiB "
        "less): planned with this setup's workspaces",
        "note: the profile has 1 option this setup does not offer: planned without it",
        "for layer 'conv1' but the cpu backend offers no option '" };
    const int want_rc[] = {5, 5, 0, 0, 8};
    for (int k = 0; k < 5; k++) {
        snprintf(args, sizeof args, "'%s' --backend cpu --analytic-profile --profile-out '%s' "
                 "--iters 0 --data synthetic:64,16 --quiet", g_net, prof);
        int rc = run(g_train, &out, args);
        ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
        free(out);
        edit_json(prof, edits[k]);
        snprintf(args, sizeof args, "'%s' --backend cpu --profile '%s' --iters 1 "
                 "--data synthetic:64,16", g_net, prof);
        rc = run(g_train, &out, args);
        ck_assert_msg(rc == want_rc[k] && strstr(out, want[k]), "edit %d: exit %d:\n%s", k, rc, out);
        ck_assert_msg(!strstr(out, "vd_"), "an internal name in:\n%s", out);
        free(out);
    }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

static void swap_convs(json_t *root) {           /* conv1's and conv2's options reversed */
    for (size_t i = 0; i < json_array_size(json_object_get(root, "layers")); i++) {
        json_t *algos = json_object_get(layer_of(root, i), "algos");
        if (json_array_size(algos) != 2) continue;
        json_t *first = json_incref(json_array_get(algos, 0));
        json_array_remove(algos, 0);
        json_array_append_new(algos, first);
    }
}
static void slow_im2col(json_t *root) {          /* im2col ten times slower: direct is chosen */
    for (size_t i = 0; i < json_array_size(json_object_get(root, "layers")); i++) {
        json_t *algos = json_object_get(layer_of(root, i), "algos"), *a;
        size_t j;
        json_array_foreach(algos, j, a) {
            if (strcmp(json_string_value(json_object_get(a, "label")), "im2col") != 0) continue;
            for (int p = 0; p < 2; p++) {
                const char *k = p ? "bwd_s" : "fwd_s";
                json_object_set_new(a, k, json_real(10 * json_real_value(json_object_get(a, k))));
            }
        }
    }
}

/* A profile that lists the same options in another order (cuDNN's tuning in
 * another process: the engines it kept, in its order) runs each layer with
 * the option of the label its plan chose: two steps train exactly as with
 * the profile in this setup's order. The CPU backend's two convolution
 * algorithms round differently, so running the other one shows (the third
 * run, where the plan chooses it). Before, the executor refused the plan
 * (exit 8: the plan's option index was the other label's here). */
START_TEST(profile_options_in_another_order) {
    setup();
    char *d = vdt_tmpdir("vdnn-harden");
    char prof[600], ck[3][600], args[2000], *out;
    snprintf(prof, sizeof prof, "%s/p.json", d);
    snprintf(args, sizeof args, "'%s' --backend cpu --analytic-profile --profile-out '%s' "
             "--iters 0 --data synthetic:64,16 --quiet", g_net, prof);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
    void (*edits[])(json_t *) = { NULL, swap_convs, slow_im2col };
    for (int k = 0; k < 3; k++) {
        if (edits[k]) edit_json(prof, edits[k]);
        snprintf(ck[k], sizeof ck[k], "%s/c%d.ckpt", d, k);
        snprintf(args, sizeof args, "'%s' --backend cpu --profile '%s' --iters 2 "
                 "--data synthetic:64,16 --eval-every -1 --save '%s'", g_net, prof, ck[k]);
        rc = run(g_train, &out, args);
        ck_assert_msg(rc == 0, "edit %d: exit %d:\n%s", k, rc, out);
        ck_assert_msg(!strstr(out, "does not offer"), "edit %d dropped an option:\n%s", k, out);
        free(out);
    }
    vdt_assert_same_file(ck[0], ck[1]);
    size_t n0, n2;
    char *c0 = vdt_slurp(ck[0], &n0), *c2 = vdt_slurp(ck[2], &n2);
    ck_assert_msg(n0 != n2 || memcmp(c0, c2, n0) != 0,
                  "the direct algorithm trained bit-identically: the test cannot tell them apart");
    vd_free(c0);
    vd_free(c2);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(bench_checks_outputs_before_the_sweep) {
    setup();
    char bench[1100], args[1400];
    snprintf(bench, sizeof bench, "%s/vdnn-bench", getenv("VD_BUILDDIR"));
    const char *flags[] = { "--csv", "--json", "--plot" };
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "'%s' %s /nonexistent-dir/out", g_net, flags[k]);
        char *out;
        int rc = run(bench, &out, args);
        char want[64];
        snprintf(want, sizeof want, "%s: /nonexistent-dir/out: cannot write there", flags[k]);
        ck_assert_msg(rc == 4 && strstr(out, want), "%s: exit %d:\n%s", flags[k], rc, out);
        ck_assert_msg(!strstr(out, "setting up"), "the sweep started:\n%s", out);
        free(out);
        snprintf(args, sizeof args, "'%s' %s /dev/null", g_net, flags[k]);
        rc = run(bench, &out, args);
        ck_assert_msg(rc == 4 && strstr(out, "not a regular file") && !strstr(out, "setting up"),
                      "%s: exit %d:\n%s", flags[k], rc, out);
        free(out);
    }
}
END_TEST

VDT_MAIN("harden", 0, bench_checks_outputs_before_the_sweep, profiles_of_other_nets_or_setups,
         profile_options_in_another_order, flag_ranges_and_combinations, damaged_states_and_weights_exit_5,
         nan_error_counts_like_progress_lines, metrics_json_lines, outputs_refuse_devices_fifos_dirs_and_follow_links, stop_signals_save_then_exit_128_plus_signal,
         data_error_later_keeps_last_checkpoint, folder_headers_checked_at_open,
         stale_temporaries_removed_by_next_save, readers_refuse_what_is_not_a_regular_file,
         yaml_nesting_limit)
