/* test_session.c — train/session.h on the CPU backend: backend choice,
 * profile (analytic, saved, reloaded, mismatched), budgets, plan, executor,
 * and the device-memory arithmetic (fed by hand: no GPU here). */
#include "tutil.h"
#include <math.h>
#include <string.h>
#include "vd_config.h"
#include "backend/backend.h"
#include "plan/plan.h"
#include "exec/exec.h"
#include "train/session.h"

enum { B = 4 };

static void open_cpu(vd_session *s, vd_net *net, vd_session_opts *so) {
    vd_err e;
    int rc = vd_session_open(s, net, B, so, &e);
    ck_assert_msg(rc == 0, "vd_session_open: %s", e.msg);
}

START_TEST(cpu_session_plans_and_trains) {
    vd_net net;
    tu_tiny_net(&net, 1, 8, 8, 3, true, B);
    vd_schedule_inplace(&net);
    vd_session_opts so;
    vd_session_opts_init(&so);
    so.backend = "cpu";
    vd_session s;
    open_cpu(&s, &net, &so);
    ck_assert_ptr_null(s.backend_why);   /* named, not chosen by auto */
    ck_assert_ptr_null(s.be->mem_info);
    ck_assert_str_eq(s.be->name, "cpu");
    ck_assert_str_eq(s.prof_how, "analytic");
    ck_assert_int_eq(s.prof.n_layers, net.n_layers);
    ck_assert_int_eq(s.prof.batch, B);
    ck_assert(!s.mem.known);
    vd_plan_opts dpo;
    vd_plan_opts_init(&dpo);
    dpo.budget = 123;
    vd_session_default_budget(&s, &dpo);
    ck_assert_uint_eq(dpo.budget, 0);         /* cpu: the plan's own need */
    ck_assert(dpo.pool_to_need);
    ck_assert_uint_eq(vd_session_max_budget(&s), UINT64_MAX);

    vd_plan_opts po;
    vd_plan_opts_init(&po);
    po.policy = VD_POLICY_ALL;
    po.batch = 999;                           /* the session's batch wins */
    vd_plan plan;
    vd_err e;
    ck_assert_msg(vd_session_plan(&s, &po, &plan, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(plan.batch, B);
    ck_assert(plan.feasible);
    ck_assert_uint_eq(plan.budget, plan.hwm);   /* budget 0: exactly the need */
    vd_exec *ex = NULL;
    s.mem.used_pinned = 123;                  /* a previous executor's: reset per executor */
    ck_assert_msg(vd_session_exec(&s, &plan, true, &ex, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(s.mem.used_pinned, 0);  /* nothing to sample on cpu */
    ck_assert_uint_eq(s.mem.used_created, 0);
    float *p = malloc((size_t)net.param_floats * sizeof *p);
    ck_assert_ptr_nonnull(p);
    vd_net_init_params(&net, p, 1);
    ck_assert_msg(vd_exec_set_state(ex, p, NULL, 0, &e) == 0, "%s", e.msg);
    float *x = vd_exec_input_x(ex);
    for (int i = 0; i < B * 64; i++) x[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < B; i++) vd_exec_input_labels(ex)[i] = i % 3;
    float loss = 0;
    ck_assert_msg(vd_exec_train_step(ex, 0.01f, 0, &loss, &e) == 0, "%s", e.msg);
    ck_assert(isfinite(loss));
    /* the loss of a fresh 3-class net starts near ln 3 */
    ck_assert_msg(fabsf(loss - logf(3.0f)) < 0.5f, "loss %g", (double)loss);
    vd_exec_stats st;
    vd_exec_get_stats(ex, &st);
    ck_assert_uint_eq(st.pool_hwm, plan.hwm);
    ck_assert_uint_gt(st.offload_bytes_iter, 0);
    vd_session_mem_report r;
    vd_session_mem_check(&s, plan.budget, &r);
    ck_assert(!r.known && r.within);
    vd_exec_destroy(&ex);
    vd_plan_free(&plan);

    /* a budget nothing fits in: VD_EBUDGET with a valid infeasible plan */
    po.budget = 1024;
    ck_assert_int_eq(vd_session_plan(&s, &po, &plan, &e), VD_EBUDGET);
    ck_assert(!plan.feasible);
    vd_plan_free(&plan);
    free(p);
    vd_session_close(&s);
    ck_assert_ptr_null(s.be);
    vd_session_close(&s);                     /* twice is harmless */
    vd_net_free(&net);
}
END_TEST

START_TEST(backend_choice) {
    vd_net net;
    tu_tiny_net(&net, 1, 8, 8, 3, false, B);
    vd_session s;
    vd_err e;
    vd_session_opts so;
    vd_session_opts_init(&so);
    so.backend = "gpu";
    ck_assert_int_eq(vd_session_open(&s, &net, B, &so, &e), VD_EUSAGE);
    ck_assert_msg(strstr(e.msg, "gpu"), "%s", e.msg);
    ck_assert_ptr_null(s.be);
    vd_session_close(&s);
    if (!vd_backend_cuda_available()) {
        so.backend = "auto";
        open_cpu(&s, &net, &so);
        ck_assert_ptr_nonnull(s.backend_why);
        ck_assert_str_eq(s.be->name, "cpu");
        ck_assert_str_eq(s.backend_why, "no CUDA device");
        vd_session_close(&s);
        open_cpu(&s, &net, NULL);             /* NULL opts = auto */
        ck_assert_ptr_nonnull(s.backend_why);
        vd_session_close(&s);
        so.backend = "cuda";
        int rc = vd_session_open(&s, &net, B, &so, &e);
        ck_assert_int_eq(rc, VD_HAVE_CUDA ? VD_EDEVICE : VD_EUNSUPPORTED);
        ck_assert_ptr_null(s.be);
    }
    ck_assert_int_eq(vd_session_open(&s, &net, 0, NULL, &e), VD_EUSAGE);
    vd_net_free(&net);
}
END_TEST

/* The tiny net (in-place schedule applied), a temporary directory *d, the
 * path of prof.json in it, and CPU session options that save the profile
 * there. */
static void profile_setup(vd_net *net, char **d, char *path, size_t n, vd_session_opts *so) {
    tu_tiny_net(net, 1, 8, 8, 3, true, B);
    vd_schedule_inplace(net);
    *d = vdt_tmpdir("vdnn-train-test");
    snprintf(path, n, "%s/prof.json", *d);
    vd_session_opts_init(so);
    so->backend = "cpu";
    so->profile_out = path;
}

/* s plans with policy, and the executor takes the plan; s is closed. */
static void plans_and_runs(vd_session *s, vd_policy policy) {
    vd_err e;
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    po.policy = policy;
    vd_plan plan;
    ck_assert_msg(vd_session_plan(s, &po, &plan, &e) == 0, "%s", e.msg);
    vd_exec *ex = NULL;
    ck_assert_msg(vd_session_exec(s, &plan, true, &ex, &e) == 0, "%s", e.msg);
    vd_exec_destroy(&ex);
    vd_plan_free(&plan);
    vd_session_close(s);
}

/* Saves q (a's profile, edited) to path, closes a, and opens *b on it for net. */
static void reopen_edited(vd_session *a, const vd_profile *q, const char *path,
                          vd_net *net, vd_session_opts *so, vd_session *b) {
    vd_err e;
    ck_assert_msg(vd_profile_save(path, q, &e) == 0, "%s", e.msg);
    vd_session_close(a);
    so->profile_out = NULL;
    so->profile_path = path;
    open_cpu(b, net, so);
}

static void profile_cleanup(vd_net *net, char *d) {
    vdt_rmrf(d);
    vd_free(d);
    vd_net_free(net);
}

START_TEST(profile_saved_and_loaded) {
    vd_net net;
    char *d, path[1100];
    vd_session_opts so;
    profile_setup(&net, &d, path, sizeof path, &so);
    vd_session a, b;
    open_cpu(&a, &net, &so);
    so.profile_out = NULL;
    so.profile_path = path;
    open_cpu(&b, &net, &so);
    ck_assert_str_eq(b.prof_how, "loaded");
    ck_assert_int_eq(b.prof.n_layers, a.prof.n_layers);
    for (int i = 0; i < a.prof.n_layers; i++) {
        ck_assert_str_eq(b.prof.layers[i].name, a.prof.layers[i].name);
        ck_assert_int_eq(b.prof.layers[i].n_algos, a.prof.layers[i].n_algos);
        for (int k = 0; k < a.prof.layers[i].n_algos; k++) {
            double x = a.prof.layers[i].algos[k].fwd_s, y = b.prof.layers[i].algos[k].fwd_s;
            /* the JSON keeps at least 6 significant digits */
            ck_assert_msg(fabs(x - y) <= 1e-6 * fabs(x) + 1e-15, "layer %d algo %d: %g vs %g", i,
                          k, x, y);
            ck_assert_uint_eq(b.prof.layers[i].algos[k].workspace,
                              a.prof.layers[i].algos[k].workspace);
        }
    }
    vd_session_close(&a);
    vd_session_close(&b);
    /* the same file at another batch: VD_EDATA, nothing held */
    vd_err e;
    ck_assert_int_eq(vd_session_open(&b, &net, B + 1, &so, &e), VD_EDATA);
    ck_assert_ptr_null(b.be);
    /* a missing file: VD_EIO */
    snprintf(path, sizeof path, "%s/none.json", d);
    ck_assert_int_eq(vd_session_open(&b, &net, B, &so, &e), VD_EIO);
    profile_cleanup(&net, d);
}
END_TEST

/* A loaded profile that gives an option less workspace than this setup's
 * engine needs (cuDNN's tuning picks another engine from one run to the
 * next): the session raises it to the setup's, the plan leaves that room and
 * the executor takes it. Before, the executor refused the plan (VD_EDATA). */
START_TEST(profile_workspace_raised) {
    vd_net net;
    char *d, path[1100];
    vd_session_opts so;
    profile_setup(&net, &d, path, sizeof path, &so);
    vd_session a;
    open_cpu(&a, &net, &so);
    ck_assert_int_eq(a.prof_raised, 0);
    /* every option that needs workspace, given 256 bytes less of it */
    vd_profile q = a.prof;   /* (a's, edited in place and saved; a closed after) */
    int lowered = 0;
    for (int i = 0; i < q.n_layers; i++)
        for (int k = 0; k < q.layers[i].n_algos; k++) {
            vd_profile_algo *pa = &q.layers[i].algos[k];
            if (pa->workspace < 256) continue;
            pa->workspace -= 256;
            if (pa->fwd_workspace >= 256) pa->fwd_workspace -= 256;
            if (pa->bwd_workspace >= 256) pa->bwd_workspace -= 256;
            lowered++;
        }
    ck_assert_int_gt(lowered, 0);   /* the tiny net's convolutions use im2col workspace */
    vd_session b;
    reopen_edited(&a, &q, path, &net, &so, &b);
    ck_assert_int_eq(b.prof_raised, lowered);
    ck_assert_uint_eq(b.prof_raised_max, 256);
    plans_and_runs(&b, VD_POLICY_ALL);
    profile_cleanup(&net, d);
}
END_TEST

/* A loaded profile with an option this setup does not offer (cuDNN's
 * tuning kept fewer engines in this process than in the one that saved
 * it): dropped, the plan chooses among the rest and runs. Before, a plan
 * could choose it and the executor refused (VD_EDATA). */
START_TEST(profile_option_dropped) {
    vd_net net;
    char *d, path[1100];
    vd_session_opts so;
    profile_setup(&net, &d, path, sizeof path, &so);
    vd_session a;
    open_cpu(&a, &net, &so);
    ck_assert_int_eq(a.prof_dropped, 0);
    /* every layer one option more: a copy of its first, ten times faster
     * (the fastest, so a plan would choose it) */
    vd_profile q = a.prof;
    for (int i = 0; i < q.n_layers; i++) {
        vd_profile_layer *pl = &q.layers[i];
        ck_assert_int_lt(pl->n_algos, VD_PROFILE_MAX_ALGOS);
        pl->algos[pl->n_algos] = pl->algos[0];
        pl->algos[pl->n_algos].fwd_s /= 10;
        pl->algos[pl->n_algos].bwd_s /= 10;
        snprintf(pl->algos[pl->n_algos].label, sizeof pl->algos[0].label, "extra");
        pl->n_algos++;
    }
    vd_session b;
    reopen_edited(&a, &q, path, &net, &so, &b);
    ck_assert_int_eq(b.prof_dropped, net.n_layers);
    char note[512];
    ck_assert(vd_session_profile_note(&b, note, sizeof note));
    ck_assert_msg(strstr(note, "options this setup does not offer"), "%s", note);
    plans_and_runs(&b, VD_POLICY_AUTO);
    profile_cleanup(&net, d);
}
END_TEST

/* The memory arithmetic, fed by hand (as if the driver had answered). */
START_TEST(memory_limits) {
    vd_net net;
    tu_tiny_net(&net, 1, 8, 8, 3, false, B);
    vd_session s;
    open_cpu(&s, &net, NULL);
    const uint64_t MiB = 1u << 20, GiB = 1u << 30;
    s.mem.known = true;
    s.mem.free_setup = 10 * GiB;
    ck_assert_uint_eq(vd_session_max_budget(&s), 10 * GiB - VD_SESSION_MARGIN);
    vd_plan_opts dpo;
    vd_plan_opts_init(&dpo);
    vd_session_default_budget(&s, &dpo);
    ck_assert_uint_eq(dpo.budget, 10 * GiB - VD_SESSION_MARGIN);
    ck_assert(dpo.pool_to_need);
    s.mem.free_setup = 100 * MiB;             /* less than the margin */
    ck_assert_uint_eq(vd_session_max_budget(&s), 0);

    s.mem.used_setup = 300 * MiB;
    uint64_t budget = GiB + 1;                /* rounds up to 1 GiB + 2 MiB */
    uint64_t limit = GiB + 2 * MiB + 300 * MiB;
    s.mem.used_max = limit;
    s.mem.used_last = limit - 5;
    s.mem.n_samples = 3;
    vd_session_mem_report r;
    vd_session_mem_check(&s, budget, &r);
    ck_assert(r.known && r.within);
    ck_assert_uint_eq(r.limit, limit);
    ck_assert_uint_eq(r.overhead, 300 * MiB);
    ck_assert_uint_eq(r.used_end, limit - 5);
    ck_assert_uint_eq(r.excess, 0);
    ck_assert_int_eq(r.n_samples, 3);
    s.mem.used_max = limit + 7;
    vd_session_mem_check(&s, budget, &r);
    ck_assert(!r.within);
    ck_assert_uint_eq(r.excess, 7);
    /* once an executor's pinned host buffers were sampled (before its pool),
     * that is the overhead: their driver mappings live outside the pool */
    s.mem.used_pinned = 310 * MiB;
    vd_session_mem_check(&s, budget, &r);
    ck_assert(r.within);
    ck_assert_uint_eq(r.overhead, 310 * MiB);
    ck_assert_uint_eq(r.limit, limit + 10 * MiB);
    s.mem.used_max = limit + 10 * MiB + 1;
    vd_session_mem_check(&s, budget, &r);
    ck_assert(!r.within);
    ck_assert_uint_eq(r.excess, 1);
    /* growth at the pool's creation counts up to VD_SESSION_POOL_TABLES
     * (1/4096 of the pool, rounded up to 2 MiB), kernel code loaded in the
     * first passes (first_use) counts whole */
    ck_assert_uint_eq(VD_SESSION_POOL_TABLES(GiB + 1), 2 * MiB);
    ck_assert_uint_eq(VD_SESSION_POOL_TABLES(138 * GiB), 36 * MiB);
    s.mem.pool_growth = 5 * MiB;               /* more than the 2 MiB allowed */
    s.mem.first_use = 4 * MiB;
    vd_session_mem_check(&s, budget, &r);
    ck_assert_uint_eq(r.pool_tables, 2 * MiB);
    ck_assert_uint_eq(r.first_use, 4 * MiB);
    ck_assert_uint_eq(r.limit, limit + 10 * MiB + 6 * MiB);
    ck_assert(r.within);
    s.mem.used_max = limit + 16 * MiB + 3;
    vd_session_mem_check(&s, budget, &r);
    ck_assert(!r.within);
    ck_assert_uint_eq(r.excess, 3);
    s.mem.pool_growth = MiB;                   /* less: only that much */
    s.mem.first_use = 0;
    vd_session_mem_check(&s, budget, &r);
    ck_assert_uint_eq(r.pool_tables, MiB);
    ck_assert_uint_eq(r.limit, limit + 11 * MiB);
    s.mem.pool_growth = 0;
    s.mem.used_pinned = 0;

    /* vd_session_plan refuses a pool larger than the device can give */
    s.mem.free_setup = VD_SESSION_MARGIN + 4096;
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    po.budget = 1 * MiB;
    vd_plan plan;
    vd_err e;
    ck_assert_int_eq(vd_session_plan(&s, &po, &plan, &e), VD_EBUDGET);
    ck_assert_msg(strstr(e.msg, "more than this device can give"), "%s", e.msg);
    vd_plan_free(&plan);
    vd_session_close(&s);
    vd_net_free(&net);
}
END_TEST

/* vd_net_init_params_range: slices of any length hold the floats of the
 * whole array (each parameter's generator jumps ahead to the slice);
 * vd_exec_init_params uploads exactly vd_net_init_params's parameters and
 * zero momentum (vdnn-train's start). */
START_TEST(init_params_in_pieces) {
    vd_net net;
    tu_tiny_net(&net, 1, 8, 8, 3, true, B);
    vd_schedule_inplace(&net);
    int64_t n = net.param_floats;
    ck_assert_int_gt(n, 100);
    size_t bytes = (size_t)n * sizeof(float);
    float *all = malloc(bytes), *part = malloc(bytes), *mom = malloc(bytes);
    ck_assert(all && part && mom);
    vd_net_init_params(&net, all, 7);
    for (int64_t len = 1; len <= n; len = 3 * len + 1) {   /* slices of 1, 4, 13, 40, ... */
        memset(part, 0, bytes);
        for (int64_t at = 0; at < n; at += len)
            vd_net_init_params_range(&net, 7, at, n - at < len ? n - at : len, part + at);
        ck_assert_msg(memcmp(all, part, bytes) == 0, "slices of %lld floats", (long long)len);
    }
    vd_session_opts so;
    vd_session_opts_init(&so);
    so.backend = "cpu";
    vd_session s;
    open_cpu(&s, &net, &so);
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    vd_plan plan;
    vd_err e;
    ck_assert_msg(vd_session_plan(&s, &po, &plan, &e) == 0, "%s", e.msg);
    vd_exec *ex = NULL;
    ck_assert_msg(vd_session_exec(&s, &plan, true, &ex, &e) == 0, "%s", e.msg);
    for (int64_t i = 0; i < n; i++) { part[i] = 5.0f; mom[i] = 1.0f; }
    ck_assert_msg(vd_exec_set_state(ex, part, mom, 3, &e) == 0, "%s", e.msg);   /* replaced next */
    ck_assert_msg(vd_exec_init_params(ex, 7, &e) == 0, "%s", e.msg);
    int64_t steps = -1;
    ck_assert_msg(vd_exec_get_state(ex, part, mom, &steps, &e) == 0, "%s", e.msg);
    ck_assert(memcmp(all, part, bytes) == 0);
    for (int64_t i = 0; i < n; i++) ck_assert(mom[i] == 0.0f);
    ck_assert_int_eq(steps, 0);
    vd_exec_destroy(&ex);
    vd_plan_free(&plan);
    vd_session_close(&s);
    free(all);
    free(part);
    free(mom);
    vd_net_free(&net);
}
END_TEST

VDT_MAIN("session", 0,
          cpu_session_plans_and_trains, init_params_in_pieces, backend_choice,
          profile_saved_and_loaded, profile_workspace_raised, profile_option_dropped, memory_limits)
