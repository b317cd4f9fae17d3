/* test_outputs.c — what the tools write: temporaries that nothing
 * can be planted at, outputs that never overwrite the run's inputs (or each
 * other), checkpoint counters at their bounds, checkpoint headers checked
 * before the rest is read, whole records or none on a full disk, stop
 * signals in the final evaluation. Runs $VD_BUILDDIR/vdnn-train, vdnn-plan
 * and vdnn-bench on $VD_SRCDIR/nets/lenet.yaml. */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <jansson.h>
#include "tutil.h"
#include "util/util.h"
#include "spec/spec.h"
#include "train/ckpt.h"

static char g_train[1024], g_plan[1024], g_bench[1024], g_net[1024], g_mnist[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_train, sizeof g_train, "%s/vdnn-train", b);
    snprintf(g_plan, sizeof g_plan, "%s/vdnn-plan", b);
    snprintf(g_bench, sizeof g_bench, "%s/vdnn-bench", b);
    snprintf(g_net, sizeof g_net, "%s/nets/lenet.yaml", s);
    snprintf(g_mnist, sizeof g_mnist, "%s/data/mnist", s);
}

/* Run bin with args (through the shell); exit status, output in *out. */
static int run(const char *bin, char **out, const char *args) {
    return vdt_run_bin(bin, args, true, out);
}

/* path's file type (lstat), or 0 when there is nothing. */
static mode_t kind(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0 ? st.st_mode & S_IFMT : 0;
}

/* ---- 1. temporaries ---------------------------------------------------------- */

START_TEST(planted_temporaries_change_nothing) {
    char *d = vdt_tmpdir("vdnn-out");
    char out[600], victim[600], p[700];
    snprintf(out, sizeof out, "%s/out.json", d);
    snprintf(victim, sizeof victim, "%s/victim", d);
    tu_write(victim, "precious", 8);
    /* at every name a temporary of out.json had before (FILE.tmp.PID), and
     * at a name of the new form with this pid: a link to the victim, a FIFO */
    snprintf(p, sizeof p, "%s.tmp.%ld", out, (long)getpid());
    ck_assert_int_eq(symlink(victim, p), 0);
    snprintf(p, sizeof p, "%s.tmp.%ld.000000000000", out, (long)getpid());
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    vd_err e = {0};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(vd_write_file_atomic(out, "{}\n", 3, &e) == VD_OK, "%s", e.msg);
    size_t n;
    char *v = vdt_slurp(victim, &n);
    ck_assert(n == 8 && !memcmp(v, "precious", 8));   /* not written through the link */
    vd_free(v);
    ck_assert_int_eq(kind(out), S_IFREG);              /* a file, not a link to the victim */
    snprintf(p, sizeof p, "%s.tmp.%ld", out, (long)getpid());
    ck_assert_int_eq(kind(p), S_IFLNK);                /* what was planted stays as it was */
    snprintf(p, sizeof p, "%s.tmp.%ld.000000000000", out, (long)getpid());
    ck_assert_int_eq(kind(p), S_IFIFO);
    /* fresh names: unpredictable, each different, nothing created */
    char *a = vd_tmp_name(out, &e), *b = vd_tmp_name(out, &e);
    ck_assert(a && b && strcmp(a, b) != 0 && kind(a) == 0);
    snprintf(p, sizeof p, "%s.tmp.%ld.", out, (long)getpid());
    ck_assert_msg(!strncmp(a, p, strlen(p)) && strlen(a) == strlen(p) + 12, "%s", a);
    vd_free(a);
    vd_free(b);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* A pid that no process has: a child that has exited and been reaped. */
static long dead_pid(void) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) _exit(0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    return (long)pid;
}

START_TEST(stale_cleaning_removes_only_regular_files) {
    char *d = vdt_tmpdir("vdnn-out");
    char out[600], victim[600], p[700];
    snprintf(out, sizeof out, "%s/ck.st", d);
    snprintf(victim, sizeof victim, "%s/victim", d);
    tu_write(victim, "precious", 8);
    long dead = dead_pid();
    snprintf(p, sizeof p, "%s.tmp.%ld.0123456789ab", out, dead);   /* a killed save's */
    tu_write(p, "stale", 5);
    snprintf(p, sizeof p, "%s.tmp.%ld.00000000000c", out, dead);   /* planted: a link */
    ck_assert_int_eq(symlink(victim, p), 0);
    snprintf(p, sizeof p, "%s.tmp.%ld.00000000000d", out, dead);   /* planted: a FIFO */
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    snprintf(p, sizeof p, "%s.tmp.%ld.0123", out, dead);           /* not the pattern */
    tu_write(p, "other", 5);
    ck_assert_int_eq(vd_tmp_clean_stale(out), 1);
    snprintf(p, sizeof p, "%s.tmp.%ld.0123456789ab", out, dead);
    ck_assert_int_eq(kind(p), 0);
    snprintf(p, sizeof p, "%s.tmp.%ld.00000000000c", out, dead);
    ck_assert_int_eq(kind(p), S_IFLNK);
    snprintf(p, sizeof p, "%s.tmp.%ld.00000000000d", out, dead);
    ck_assert_int_eq(kind(p), S_IFIFO);
    snprintf(p, sizeof p, "%s.tmp.%ld.0123", out, dead);
    ck_assert_int_eq(kind(p), S_IFREG);
    ck_assert_int_eq(kind(victim), S_IFREG);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- 2. outputs never overwrite inputs ---------------------------------------- */

/* bin ARGS (run in the current directory) must exit 2 naming both flags,
 * leaving every file of keep[0..nk) (at most 4) byte for byte as it was. */
static void expect_clash(const char *bin, const char *args, const char *out_flag,
                         const char *in_flag, const char *const *keep, int nk) {
    char *before[4], *out;
    size_t n0[4];
    for (int i = 0; i < nk; i++) before[i] = vdt_slurp(keep[i], &n0[i]);
    int rc = run(bin, &out, args);
    ck_assert_msg(rc == 2, "%s: exit %d, expected 2:\n%s", args, rc, out);
    ck_assert_msg(strstr(out, out_flag) && strstr(out, in_flag) && strstr(out, "would overwrite"),
                  "%s: the message does not name %s and %s:\n%s", args, out_flag, in_flag, out);
    vd_free(out);
    for (int i = 0; i < nk; i++) {
        size_t n1;
        char *after = vdt_slurp(keep[i], &n1);
        ck_assert_msg(n1 == n0[i] && !memcmp(before[i], after, n1), "%s: %s changed", args,
                      keep[i]);
        vd_free(after);
        vd_free(before[i]);
    }
}

START_TEST(outputs_never_overwrite_inputs) {
    setup();
    char *d = vdt_tmpdir("vdnn-out");
    ck_assert_int_eq(chdir(d), 0);
    char cmd[1400], *out;
    snprintf(cmd, sizeof cmd, "cp '%s' net.yaml", g_net);
    ck_assert_int_eq(system(cmd), 0);
    const char *T = "net.yaml --data synthetic:64,16 --batch 8 --iters 2 --quiet";
    snprintf(cmd, sizeof cmd, "%s --save ck.st --profile-out prof.json", T);
    int rc = run(g_train, &out, cmd);
    ck_assert_msg(rc == 0, "%s", out);
    vd_free(out);
    ck_assert_int_eq(symlink("ck.st", "link-to-ck"), 0);
    ck_assert_int_eq(link("net.yaml", "hard-net.yaml"), 0);
    /* --keep's numbered and --save-best's names: a copy of the checkpoint at
     * a numbered name, links from such names to the spec */
    ck_assert_int_eq(system("cp ck.st ck-1.st && cp ck.st.state ck-1.st.state"), 0);
    ck_assert_int_eq(symlink("net.yaml", "z-1.st"), 0);
    ck_assert_int_eq(symlink("net.yaml", "n-best.st"), 0);
    const char *ck[] = { "ck.st", "ck.st.state", "net.yaml", "prof.json" };
    static const struct { const char *args, *out, *in; } cases[] = {
        { "--resume ck.st --metrics ck.st", "--metrics", "--resume" },
        { "--resume ck.st --metrics ck.st.state", "--metrics", "--resume" },
        { "--resume ck.st --plan-json ./ck.st", "--plan-json", "--resume" },
        { "--resume ck.st --profile-out link-to-ck", "--profile-out", "--resume" },
        { "--init ck.st --save ck.st", "--save", "--init" },
        { "--metrics net.yaml", "--metrics", "the spec" },
        { "--plan-json hard-net.yaml", "--plan-json", "the spec" },
        { "--save net.yaml", "--save", "the spec" },
        { "--save x.st --metrics x.st.state", "--metrics", "--save" },
        { "--metrics m.json --plan-json m.json", "--plan-json", "--metrics" },
        { "--step-times-out net.yaml", "--step-times-out", "the spec" },
        { "--plan-json p.json --step-times-out p.json", "--step-times-out", "--plan-json" },
        { "--profile prof.json --profile-out prof.json", "--profile-out", "--profile" },
        /* a numbered checkpoint (iteration 1 of 2) over an input or an output,
         * whether it exists (its identity) or not (its name) */
        { "--init ck-1.st --save ck.st --save-every 1 --keep 1",
          "the numbered checkpoint (--keep)", "--init" },
        { "--save z.st --save-every 1 --keep 1", "the numbered checkpoint (--keep)", "the spec" },
        { "--save y.st --save-every 1 --keep 1 --metrics y-1.st.state",
          "the numbered checkpoint (--keep)", "--metrics" },
        { "--save n.st --save-best", "--save-best", "the spec" },
        { "--save y.st --save-best --plan-json y-best.st.state", "--plan-json", "--save-best" },
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++) {
        snprintf(cmd, sizeof cmd, "%s %s", T, cases[i].args);
        expect_clash(g_train, cmd, cases[i].out, cases[i].in, ck, 4);
    }
    ck_assert_int_eq(kind("m.json"), 0);      /* nothing was opened for writing */
    ck_assert_int_eq(kind("x.st"), 0);
    /* vdnn-plan and vdnn-bench */
    expect_clash(g_plan, "net.yaml --trace net.yaml", "--trace", "the spec", ck, 4);
    expect_clash(g_plan, "net.yaml --profile prof.json --trace prof.json", "--trace",
                 "--profile", ck, 4);
    expect_clash(g_plan, "net.yaml --trace t.json --profile-out ./t.json", "--trace",
                 "--profile-out", ck, 4);
    expect_clash(g_bench, "net.yaml --csv net.yaml", "--csv", "the spec", ck, 4);
    expect_clash(g_bench, "net.yaml --csv o --json o", "--json", "--csv", ck, 4);
    /* resuming a checkpoint and saving over it is the way to continue a run */
    snprintf(cmd, sizeof cmd, "%s --resume ck.st --save ck.st --iters 3", T);
    rc = run(g_train, &out, cmd);
    ck_assert_msg(rc == 0, "%s", out);
    vd_free(out);
    /* a data set's files: its directory is an input tree */
    char p[1200];
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", g_mnist);
    if (kind(p)) {
        ck_assert_int_eq(mkdir("mnist", 0755), 0);
        static const char *const f[] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" };
        for (int i = 0; i < 4; i++) {   /* links to the real files: a test that fails
                                           must not touch them */
            snprintf(p, sizeof p, "%s/%s", g_mnist, f[i]);
            snprintf(cmd, sizeof cmd, "mnist/%s", f[i]);
            ck_assert_int_eq(symlink(p, cmd), 0);
        }
        const char *lab[] = { "mnist/t10k-labels-idx1-ubyte" };
        expect_clash(g_train, "net.yaml --data mnist:mnist --iters 1 --quiet "
                     "--metrics mnist/t10k-labels-idx1-ubyte", "--metrics", "--data", lab, 1);
    }
    ck_assert_int_eq(chdir("/"), 0);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- 3. checkpoint counters at their bounds ------------------------------------ */

START_TEST(counters_round_trip_at_their_bounds) {
    setup();
    char *d = vdt_tmpdir("vdnn-out");
    char ck[600], args[2000], *out;
    snprintf(ck, sizeof ck, "%s/ck.st", d);
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 1 --quiet "
             "--save '%s'", g_net, ck);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0, "%s", out);
    vd_free(out);
    vd_net net;
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(g_net, &net, &e) == 0, "%s", e.msg);
    float *prm = vd_malloc(sizeof(float) * (size_t)net.param_floats, NULL);
    float *mom = vd_malloc(sizeof(float) * (size_t)net.param_floats, NULL);
    vd_train_state st;
    ck_assert_msg(vd_ckpt_load(ck, &net, prm, mom, &st, &e) == 0, "%s", e.msg);
    /* one iteration before the last a run can reach */
    st.iteration = st.sgd_steps = VD_CKPT_MAX_ITERATION - 1;
    ck_assert_msg(vd_ckpt_save(ck, &net, prm, mom, &st, &e) == 0, "%s", e.msg);
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters %lld --quiet "
             "--resume '%s' --save '%s'", g_net, VD_CKPT_MAX_ITERATION, ck, ck);
    rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0, "%s", out);
    vd_free(out);
    vd_train_state back;
    ck_assert_msg(vd_ckpt_load(ck, &net, prm, mom, &back, &e) == 0, "%s", e.msg);
    ck_assert(back.iteration == VD_CKPT_MAX_ITERATION && back.sgd_steps == VD_CKPT_MAX_ITERATION);
    rc = run(g_train, &out, args);   /* and that state resumes: nothing left to run */
    ck_assert_msg(rc == 0 && strstr(out, "no training iterations ran"), "%s", out);
    vd_free(out);
    /* beyond: refused on reading, never wrapped */
    st.iteration = st.sgd_steps = VD_CKPT_MAX_ITERATION + 1;
    ck_assert_int_eq(vd_ckpt_save(ck, &net, prm, mom, &st, &e), 0);
    ck_assert_int_eq(vd_ckpt_load(ck, &net, prm, mom, &back, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "out of range"), "%s", e.msg);
    st.iteration = 5;
    st.sgd_steps = 6;       /* more SGD steps than iterations */
    ck_assert_int_eq(vd_ckpt_save(ck, &net, prm, mom, &st, &e), 0);
    ck_assert_int_eq(vd_ckpt_load(ck, &net, prm, mom, &back, &e), VD_EDATA);
    vd_free(prm);
    vd_free(mom);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- 4. headers first ------------------------------------------------------------ */

/* A sparse file of 6 GiB at path starting with head[0..n). */
static void sparse_file(const char *path, const void *head, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, head, n), (ssize_t)n);
    ck_assert_int_eq(ftruncate(fd, (off_t)6 << 30), 0);
    close(fd);
}

START_TEST(checkpoint_headers_checked_before_the_data) {
    setup();
    char *d = vdt_tmpdir("vdnn-out");
    char f[600], args[2000], *out;
    snprintf(f, sizeof f, "%s/big.st", d);
    static const struct { const char *head; size_t n; const char *want; } cases[] = {
        { "\xff\xff\xff\xff\xff\xff\xff\xff", 8, "implausible" },     /* length 2^64 - 1 */
        { "\x10\0\0\0\0\0\0\0{\"a\":[1,2,3    ", 24, "bad JSON" },
        { "\x36\0\0\0\0\0\0\0{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
          62, "not a checkpoint of lenet" },   /* 6 GiB of data for 4 bytes of tensors */
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++) {
        sparse_file(f, cases[i].head, cases[i].n);
        for (int k = 0; k < 2; k++) {
            snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 1 --quiet "
                     "%s '%s'", g_net, k ? "--resume" : "--init", f);
            double t0 = vd_now();
            int rc = run(g_train, &out, args);
            double dt = vd_now() - t0;
            ck_assert_msg(rc == 5 && strstr(out, cases[i].want), "case %zu %s: exit %d:\n%s", i,
                          k ? "--resume" : "--init", rc, out);
            /* "under 0.1 s"; 5 s for a loaded test machine (reading 6 GiB takes longer) */
            ck_assert_msg(dt < 5, "case %zu: %.1f s", i, dt);
            vd_free(out);
        }
    }
    /* the largest resident size of any of them (they and every earlier
     * child, all small): far from the 6 GiB a whole read takes; 200 MB
     * leaves room for a sanitizer build's own */
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_CHILDREN, &ru), 0);
    ck_assert_msg(ru.ru_maxrss < 200 * 1024, "a reader grew to %ld KiB", ru.ru_maxrss);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- 5. full disks ----------------------------------------------------------------- */

START_TEST(full_disk_leaves_whole_records_or_the_old_file) {
    setup();
    char *d = vdt_tmpdir("vdnn-out");
    char m[600], pj[600], args[2000], *out;
    snprintf(m, sizeof m, "%s/m.jsonl", d);
    snprintf(pj, sizeof pj, "%s/plan.json", d);
    tu_write(pj, "old plan\n", 9);
    /* a 2 KiB file size limit (dash's ulimit -f counts 512-byte blocks;
     * SIGXFSZ ignored, so that writes fail with EFBIG as they fail with
     * ENOSPC on a full disk): the metrics stop in the middle of some
     * record, the plan does not fit */
    snprintf(args, sizeof args, "-c \"trap '' XFSZ; ulimit -f 4; exec '%s' '%s' --data synthetic:64,16 "
             "--batch 8 --iters 40 --log-every 1 --quiet --metrics '%s'\"", g_train, g_net, m);
    int rc = run("/bin/sh", &out, args);
    ck_assert_msg(strstr(out, m) && strstr(out, strerror(EFBIG)), "exit %d:\n%s", rc, out);
    vd_free(out);
    size_t n;
    char *text = vdt_slurp(m, &n);
    ck_assert_msg(n > 0 && n <= 2048 && text[n - 1] == '\n', "%zu bytes", n);
    int lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        ck_assert_msg(j != NULL, "line %d is not a whole record: %s", lines + 1, line);
        json_decref(j);
    }
    ck_assert_int_gt(lines, 1);
    vd_free(text);
    snprintf(args, sizeof args, "-c \"trap '' XFSZ; ulimit -f 2; exec '%s' '%s' --data synthetic:64,16 "
             "--batch 8 --iters 1 --quiet --plan-json '%s'\"", g_train, g_net, pj);
    rc = run("/bin/sh", &out, args);
    ck_assert_msg(rc == 4 && strstr(out, "plan.json") && strstr(out, strerror(EFBIG)),
                  "exit %d:\n%s", rc, out);
    vd_free(out);
    text = vdt_slurp(pj, &n);
    ck_assert(n == 9 && !memcmp(text, "old plan\n", 9));   /* the old file, whole */
    vd_free(text);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* --step-times-out: one row per step of the plan that ran (its step count
 * and labels from --plan-json of the same run), the measured durations
 * adding up to the end times, the predicted ones to the predicted ends, and
 * no D2H copy beside any step of a plan that offloads nothing. Its one H2D
 * copy, the next batch's staging, runs beside the steps on its own stream:
 * on a loaded machine it can cover half of a step, which the column then
 * says. */
START_TEST(step_times_out_has_every_step) {
    setup();
    char *d = vdt_tmpdir("vdnn-out");
    char pj[600], st[600], args[2000], *out;
    snprintf(pj, sizeof pj, "%s/plan.json", d);
    snprintf(st, sizeof st, "%s/steps.tsv", d);
    snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 2 --quiet "
             "--plan-json '%s' --step-times-out '%s'", g_net, pj, st);
    int rc = run(g_train, &out, args);
    ck_assert_msg(rc == 0 && strstr(out, "step times (last iteration"), "exit %d:\n%s", rc, out);
    vd_free(out);
    json_error_t je;
    json_t *plan = json_load_file(pj, 0, &je);
    ck_assert_msg(plan != NULL, "%s", je.text);
    json_t *steps = json_object_get(plan, "steps");
    size_t n_steps = json_array_size(steps), n;
    ck_assert_uint_gt(n_steps, 0);
    char *text = vdt_slurp(st, &n);
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    ck_assert_str_eq(line, "step\top\tmeasured_ms\tpredicted_ms\tend_ms\tpredicted_end_ms\tbeside");
    double end = 0, pend = 0;
    size_t rows = 0;
    for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save), rows++) {
        ck_assert_uint_lt(rows, n_steps);
        int s;
        char op[256], beside[32];
        double meas, pred, e1, pe1;
        ck_assert_msg(sscanf(line, "%d\t%255[^\t]\t%lf\t%lf\t%lf\t%lf\t%31[^\n]", &s, op, &meas,
                             &pred, &e1, &pe1, beside) == 7, "row %zu: %s", rows, line);
        json_t *js = json_array_get(steps, rows);
        char want[300];
        const char *layer = json_string_value(json_object_get(js, "layer"));
        if (layer)
            snprintf(want, sizeof want, "%s %s", json_string_value(json_object_get(js, "kind")),
                     layer);
        else   /* the update step */
            snprintf(want, sizeof want, "%s", json_string_value(json_object_get(js, "kind")));
        ck_assert_int_eq(s, (int)rows);
        ck_assert_str_eq(op, want);
        ck_assert_msg(!strcmp(beside, "no copy") || !strcmp(beside, "H2D"), "row %zu: %s", rows,
                      line);
        ck_assert(meas >= 0 && pred >= 0);
        /* each figure is printed to 1e-4 ms: the sums drift by at most that
         * per row */
        end += meas;
        pend += pred;
        ck_assert_msg(fabs(end - e1) <= 1e-4 * (double)(rows + 1), "row %zu: %g vs %g", rows, end, e1);
        ck_assert_msg(fabs(pend - pe1) <= 1e-4 * (double)(rows + 1), "row %zu: %g vs %g", rows, pend, pe1);
    }
    ck_assert_uint_eq(rows, n_steps);
    vd_free(text);
    json_decref(plan);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* The report says how many steps replayed the captured iteration: one
 * eager step, one capture, the rest replayed, on host batches (MNIST) as on
 * synthetic batches made on the device (their samples reach a replay
 * through the backend's synthetic slots, backend.h's synth_set). */
START_TEST(report_counts_replays) {
    setup();
    char args[2200], data[1100], *out, *dir = vdt_make_mnist(64, 8);
    for (int k = 0; k < 2; k++) {
        snprintf(data, sizeof data, k ? "synthetic:64,16" : "mnist:%s", dir);
        snprintf(args, sizeof args, "'%s' --data '%s' --batch 8 --iters 6", g_net, data);
        int rc = run(g_train, &out, args);
        ck_assert_msg(rc == 0 && strstr(out, "captured iteration: 4 of 6 training steps replayed "
                                             "it (1 captured)\n"), "%s: exit %d:\n%s", data, rc,
                      out);
        ck_assert_msg(!k || strstr(out, "synthetic batches generated on the device"), "%s", out);
        vd_free(out);
    }
    /* --graph auto (the default) leaves a plan that offloads eager, and
     * says so; --graph on replays it */
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "'%s' --data synthetic:64,16 --batch 8 --iters 6 --policy all%s",
                 g_net, k ? " --graph on" : "");
        int rc = run(g_train, &out, args);
        ck_assert_msg(rc == 0 && strstr(out, k ? "captured iteration: 4 of 6 training steps replayed it"
                                               : "captured iteration: none (--graph auto: a plan that "
                                                 "offloads runs eagerly"), "%s: exit %d:\n%s", args, rc, out);
        vd_free(out);
    }
    vdt_rmrf(dir);
    vd_free(dir);
}
END_TEST

/* ---- 6. stop signals in every phase -------------------------------------------- */

/* Run sh -c cmd (its output to log), wait until log holds want (at most
 * 60 s), send sig; returns the exit status (the test fails unless the
 * process exited), *after_s the seconds it took to end after the signal. */
static int signal_when(const char *cmd, const char *log, const char *want, int sig,
                       double *after_s) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    bool seen = false;
    for (int i = 0; i < 1200 && !seen; i++) {
        usleep(50000);
        size_t n;
        if (kind(log)) {
            char *t = vdt_slurp(log, &n);
            seen = strstr(t, want) != NULL;
            vd_free(t);
        }
    }
    ck_assert_msg(seen, "%s: never printed '%s'", cmd, want);
    double t0 = vd_now();
    ck_assert_int_eq(kill(pid, sig), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    *after_s = vd_now() - t0;
    ck_assert_msg(WIFEXITED(st), "%s: died of signal %d", cmd, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return WEXITSTATUS(st);
}

START_TEST(stop_during_final_evaluation) {
    setup();
    char *d = vdt_tmpdir("vdnn-out");
    char ck[600], log[600], cmd[3000];
    snprintf(ck, sizeof ck, "%s/ck.st", d);
    snprintf(log, sizeof log, "%s/log", d);
    /* 2 iterations, saved, then an evaluation of 50,000 batches (minutes) */
    snprintf(cmd, sizeof cmd, "exec '%s' '%s' --data synthetic:64,400000 --batch 8 --iters 2 "
             "--log-every 1 --save '%s' >'%s' 2>&1", g_train, g_net, ck, log);
    double dt;
    int rc = signal_when(cmd, log, "saved ", SIGTERM, &dt);
    ck_assert_msg(dt < 5, "the evaluation ran on for %.1f s", dt);
    size_t n;
    char *t = vdt_slurp(log, &n);
    ck_assert_msg(rc == 143 && strstr(t, "interrupted by SIGTERM"), "exit %d:\n%s", rc, t);
    ck_assert_msg(!strstr(t, "test accuracy"), "%s", t);
    vd_free(t);
    ck_assert_int_eq(kind(ck), S_IFREG);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(stop_during_the_smallest_budget_search) {
    setup();
    char *d = vdt_tmpdir("vdnn-out");
    char spec[600], log[600], cmd[3000];
    snprintf(spec, sizeof spec, "%s/deep.yaml", d);
    snprintf(log, sizeof log, "%s/log", d);
    /* a chain of 3,000 layers: its smallest budgets take seconds, and the
     * search reports its progress after one */
    FILE *f = fopen(spec, "w");
    ck_assert(f != NULL);
    fprintf(f, "name: deep\ninput: { channels: 16, height: 8, width: 8, classes: 10 }\n"
               "train: { batch: 32 }\nlayers:\n");
    for (int k = 0; k < 2998; k++)
        fprintf(f, k % 2 ? "  - { name: r%d, type: relu }\n"
                         : "  - { name: c%d, type: conv, out: 16, kernel: 3, pad: 1 }\n", k);
    fprintf(f, "  - { name: fc, type: fc, out: 10 }\n"
               "  - { name: loss, type: softmax_cross_entropy }\n");
    ck_assert_int_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "exec '%s' '%s' --min-budget >'%s' 2>&1", g_plan, spec, log);
    double dt;
    int rc = signal_when(cmd, log, "searching the smallest budget", SIGINT, &dt);
    ck_assert_msg(dt < 2, "the search ran on for %.1f s", dt);
    size_t n;
    char *t = vdt_slurp(log, &n);
    ck_assert_msg(rc == 130 && strstr(t, "interrupted by SIGINT"), "exit %d:\n%s", rc, t);
    vd_free(t);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

VDT_MAIN("outputs", 0, planted_temporaries_change_nothing,
         stale_cleaning_removes_only_regular_files, outputs_never_overwrite_inputs,
         counters_round_trip_at_their_bounds, checkpoint_headers_checked_before_the_data,
         full_disk_leaves_whole_records_or_the_old_file, step_times_out_has_every_step,
         report_counts_replays,
         stop_during_final_evaluation,
         stop_during_the_smallest_budget_search)
