/* test_mpi.c — vdnn-train --mpi (backend/allreduce.h's MPI part, the
 * loader's shards, exec.h vd_exec_group_set_procs):
 *
 * - a loader sharded over N processes (vd_loader_cfg rank/ranks) hands
 *   process r exactly batches r, r + N, ... of the unsharded loader, through
 *   the worker threads and as synth_device descriptions, and counts the
 *   position of all processes' batches (every build);
 * - with MPI and mpirun: `mpirun -np 2 vdnn-train --mpi --backend cpu`
 *   writes the checkpoint and .state bytes of `vdnn-train --gpus 2` at the
 *   same global batch, with one report (rank 0's); `mpirun -np 1 ... --mpi`
 *   those of the plain run; --mpi with --gpus is exit 2;
 * - without MPI in the build: --mpi is exit 8 naming MPI.
 * mpirun comes from meson (VD_MPIRUN; the test skips, saying so, when it is
 * empty); as root it needs OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM), set by meson. */
#include "tutil.h"
#include "vd_config.h"
#include "data/data.h"

/* ---- the loader's shards ---------------------------------------------------- */

enum { SH_B = 4, SH_N = 3, SH_K = 4 };    /* batch per shard, processes, batches per process */

START_TEST(loader_shards_are_every_nth_batch) {
    vd_net net;
    tu_tiny_net(&net, 3, 8, 8, 10, false, 4);
    vd_dataset *ds;
    vd_err e;
    /* 50 train samples: the 12 batches of 4 cross an epoch (a new permutation) */
    ck_assert_int_eq(vd_data_open("synthetic:50,10", &net, SH_B, 7, false, &ds, &e), 0);
    const int F = 3 * 8 * 8;
    static float x[SH_N * SH_K][SH_B * 192], xs[SH_B * 192];
    static int32_t y[SH_N * SH_K][SH_B], ys[SH_B];
    static int64_t idx[SH_N * SH_K][SH_B], is[SH_B];
    for (int synth = 0; synth < 2; synth++) {
        /* unsharded: all N*K batches, from sample 10 on */
        vd_loader_cfg c = { .split = VD_SPLIT_TRAIN, .batch = SH_B, .shuffle = true, .seed = 7,
                            .start = 10, .threads = 2, .synth_device = synth };
        vd_loader *ld;
        ck_assert_int_eq(vd_loader_create(&ld, ds, &c, &e), 0);
        for (int b = 0; b < SH_N * SH_K; b++) {
            vd_synth_batch sb = { .index = idx[b] };
            ck_assert_int_eq(synth ? vd_loader_next_synth(ld, &sb, y[b], &e)
                                   : vd_loader_next(ld, x[b], y[b], &e), 0);
        }
        vd_loader_destroy(&ld);
        for (int r = 0; r < SH_N; r++) {
            vd_loader_cfg cs = c;
            cs.rank = r;
            cs.ranks = SH_N;
            ck_assert_int_eq(vd_loader_create(&ld, ds, &cs, &e), 0);
            for (int k = 0; k < SH_K; k++) {
                int b = k * SH_N + r;
                vd_synth_batch sb = { .index = is };
                ck_assert_int_eq(synth ? vd_loader_next_synth(ld, &sb, ys, &e)
                                       : vd_loader_next(ld, xs, ys, &e), 0);
                ck_assert_mem_eq(ys, y[b], sizeof ys);
                if (synth) ck_assert_mem_eq(is, idx[b], sizeof is);
                else ck_assert_mem_eq(xs, x[b], sizeof(float) * (size_t)(SH_B * F));
            }
            /* all processes' K batches counted: 10 + K*N*B */
            ck_assert_uint_eq(vd_loader_position(ld), 10 + SH_K * SH_N * SH_B);
            vd_loader_destroy(&ld);
        }
    }
    vd_loader_cfg bad = { .split = VD_SPLIT_TRAIN, .batch = SH_B, .rank = 2, .ranks = 2 };
    vd_loader *ld;
    ck_assert_int_eq(vd_loader_create(&ld, ds, &bad, &e), VD_EINTERNAL);
    vd_data_close(&ds);
    vd_net_free(&net);
}
END_TEST

/* ---- the command line ----------------------------------------------------- */

static char g_train[1024], g_net[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_train, sizeof g_train, "%s/vdnn-train", b);
    snprintf(g_net, sizeof g_net, "%s/nets/lenet.yaml", s);
}

/* The run every case below makes: LeNet on synthetic data, global batch 16,
 * 3 iterations, the CPU backend, the final evaluation (256 held-out images). */
#define RUN "%s --backend cpu --batch 16 --iters 3 --save %s"

#if VD_HAVE_MPI
static void assert_same_ckpt(const char *a, const char *b) {
    char sa[1200], sb[1200];
    vdt_assert_same_file(a, b);
    snprintf(sa, sizeof sa, "%s.state", a);
    snprintf(sb, sizeof sb, "%s.state", b);
    vdt_assert_same_file(sa, sb);
}

/* The text of out from key to the end of its line, into buf. */
static void line_from(const char *out, const char *key, char *buf, size_t n) {
    const char *p = strstr(out, key);
    ck_assert_msg(p, "no '%s' in: %s", key, out);
    size_t k = strcspn(p, "\n");
    ck_assert(k < n);
    memcpy(buf, p, k);
    buf[k] = 0;
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++) n++;
    return n;
}
#endif

START_TEST(cli_mpi) {
    setup();
    char *out, args[3000];
#if !VD_HAVE_MPI
    /* no MPI in this build: exit 8 naming MPI, before anything runs */
    snprintf(args, sizeof args, "%s --mpi --backend cpu --iters 1", g_net);
    int rc = vdt_run_bin(g_train, args, true, &out);
    ck_assert_msg(rc == VD_EUNSUPPORTED && strstr(out, "MPI"), "exit %d: %s", rc, out);
    vd_free(out);
    ck_assert_int_eq(vdt_run_bin(g_train, "--version", true, &out), 0);
    ck_assert_msg(strstr(out, "mpi: no"), "%s", out);
    vd_free(out);
#else
    int rc;
    const char *mpirun = getenv("VD_MPIRUN");
    if (!mpirun || !*mpirun)
        fprintf(stderr, "test_mpi: SKIPPED the mpirun runs: meson found no mpirun "
                "(Debian: openmpi-bin)\n");
    else {
    char *dir = vdt_tmpdir("mpi"), a[1100], b[1100];
    snprintf(a, sizeof a, "%s/a.safetensors", dir);
    snprintf(b, sizeof b, "%s/b.safetensors", dir);
    /* two processes = two threads (--gpus 2); the final loss and the
     * evaluation (gathered from the ranks) too */
    char loss[200], acc[200];
    snprintf(args, sizeof args, RUN " --quiet --gpus 2", g_net, a);
    rc = vdt_run_bin(g_train, args, true, &out);
    ck_assert_msg(rc == 0, "%s", out);
    line_from(out, "final loss ", loss, sizeof loss);
    line_from(out, "test accuracy ", acc, sizeof acc);
    vd_free(out);
    /* --oversubscribe: more processes than the cores mpirun counts.
     * MPI_LSAN: Open MPI's plugins leak some 3,300 allocations (120 KB) by
     * MPI_Finalize, in modules unloaded by then that no LSan suppression can
     * name; so the ranks of a sanitizer build run without leak checking (the
     * loader test above and test_dp run the same code in-process with it).
     * Without sanitizers the variable is ignored. (The bytes compared depend
     * on OpenBLAS's thread count: meson's OPENBLAS_NUM_THREADS=1 reaches the
     * ranks through mpirun's environment.) */
#define MPI_LSAN "-x LSAN_OPTIONS=detect_leaks=0 "
    snprintf(args, sizeof args, MPI_LSAN "-np 2 --oversubscribe '%s' " RUN " --mpi", g_train,
             g_net, b);
    rc = vdt_run_bin(mpirun, args, true, &out);
    ck_assert_msg(rc == 0 && strstr(out, "2 ranks (mpi all-reduce), 8 samples each"), "%s", out);
    /* rank 0 alone logs and reports */
    ck_assert_msg(count(out, "trained lenet") == 1 && count(out, "iter 3/3") == 1 &&
                  count(out, "saved ") == 1, "%s", out);
    ck_assert_msg(strstr(out, loss) && strstr(out, acc), "not '%s' and '%s': %s", loss, acc, out);
    vd_free(out);
    assert_same_ckpt(a, b);
    /* one process = the plain run */
    snprintf(args, sizeof args, RUN " --quiet", g_net, a);
    ck_assert_int_eq(vdt_run_bin(g_train, args, true, NULL), 0);
    snprintf(args, sizeof args, MPI_LSAN "-np 1 '%s' " RUN " --quiet --mpi", g_train, g_net, b);
    rc = vdt_run_bin(mpirun, args, true, &out);
    ck_assert_msg(rc == 0, "%s", out);
    vd_free(out);
    assert_same_ckpt(a, b);
    ck_assert_int_eq(vdt_run_bin(g_train, "--version", true, &out), 0);
    ck_assert_msg(strstr(out, "mpi: yes"), "%s", out);
    vd_free(out);
    vdt_rmrf(dir);
    vd_free(dir);
    }
#endif
    /* --mpi with --gpus: exit 2 */
    snprintf(args, sizeof args, "%s --backend cpu --mpi --gpus 2", g_net);
    rc = vdt_run_bin(g_train, args, true, &out);
    ck_assert_msg(rc == VD_EUSAGE && strstr(out, "--mpi and --gpus exclude each other"),
                  "exit %d: %s", rc, out);
    vd_free(out);
    /* --help and the man page name --mpi with an mpirun example */
    ck_assert_int_eq(vdt_run_bin(g_train, "--help", true, &out), 0);
    ck_assert_msg(strstr(out, "--mpi") && strstr(out, "mpirun -np"), "%s", out);
    vd_free(out);
    char man[1200];
    snprintf(man, sizeof man, "%s/man/vdnn-train.1", getenv("VD_SRCDIR"));
    size_t mn;
    char *page = vdt_slurp(man, &mn);
    ck_assert_msg(strstr(page, "\\-\\-mpi") && strstr(page, "mpirun \\-np"),
                  "vdnn-train.1 does not show --mpi with mpirun");
    vd_free(page);
}
END_TEST

VDT_MAIN("mpi", 0, loader_shards_are_every_nth_batch, cli_mpi)
