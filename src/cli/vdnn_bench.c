/* vdnn-bench — sweep device memory budgets x offload policies for one net
 * and batch: at each point make the plan, create the executor, train a few
 * warm-up and timed iterations on synthetic data, and report measured and
 * predicted iteration time, throughput, memory and copies as a table
 * (stdout), CSV, JSON and an SVG plot. Progress goes to stderr. One profile
 * (measured on CUDA) serves every point. See man vdnn-bench(1). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vd_config.h"
#include "cli/cli_common.h"
#include "util/util.h"
#include "util/json.h"
#include "net/net.h"
#include "spec/spec.h"
#include "backend/backend.h"
#include "plan/plan.h"
#include "exec/exec.h"
#include "data/data.h"
#include "train/session.h"

static const char *const PROG = "vdnn-bench";
static const char *const DEFAULT_POLICIES = "none,all,conv,dyn,auto";
enum { MAX_BUDGETS = 256, DEFAULT_STEPS = 5, MAX_ROUNDS = 16 };
/* Warm-up steps at most beyond --warmup until a captured iteration replays:
 * each of the executor's graph keys (up to 4) runs eagerly once and is
 * captured the next time it comes, steps alternating between two keys */
enum { BENCH_CAPTURE_WARMUP = 10 };

static void usage(FILE *f) {
    char pol[160], nets[3 * PATH_MAX];
    vd_cli_policies(pol, sizeof pol);
    vd_cli_nets_help(nets, sizeof nets);
    fprintf(f,
"usage: vdnn-bench NET.yaml|NAME [options]\n"
"\n"
"Sweep device memory budgets x offload policies: at each point plan, create\n"
"the executor, train --warmup then --iters iterations on synthetic data, and\n"
"report the measured and predicted iteration time, images/s, memory and\n"
"copies. The table goes to stdout, progress to stderr.\n"
"%s"
"\n"
"Sweep:\n"
"  --batch N            batch size (default: the spec's train.batch)\n"
"  --budgets LIST       comma-separated sizes (12G, 512M, bytes) and the words\n"
"                       'min' (smallest budget any listed policy fits in) and\n"
"                       'peak' (what policy none needs); default: --steps\n"
"                       budgets evenly from min to peak\n"
"  --steps N            budgets in the default sweep (default %d)\n"
"  --policies LIST      comma-separated policies: %s\n"
"                       (default %s)\n"
"  --prefetch P         auto | paper (default auto)\n"
"  --chunks K|L=K,...   split layers into K batch chunks: every layer that can be,\n"
"                       or the named ones (a run of them shares its chunks);\n"
"                       less memory per step (default: none split)\n"
"  --freeze PATTERN     train with these parameters frozen, as vdnn-train --freeze\n"
"                       (POSIX extended regex searched in the parameter names)\n"
"  --warmup N           untimed iterations per point (default 2; a captured\n"
"                       iteration warms up on until it replays its graph)\n"
"  --iters N            timed iterations per point (default 5)\n"
"  --rounds N           sweep N times, each point once per round (a fresh\n"
"                       executor, --warmup then --iters), and report the mean\n"
"                       over the rounds: a drift of the device's speed (clock,\n"
"                       heat) during the sweep lands on every point alike\n"
"                       (default 1, at most %d)\n"
"  --seed N             seed of the initial weights and synthetic data\n"
"  --optimizer O        sgd | adamw: the update the iterations run and whose\n"
"                       state the plans keep (default: the spec's\n"
"                       train.optimizer, else sgd)\n"
"  --graph G            auto | on | off: capture the training iteration once and\n"
"                       replay it (a CUDA graph); auto (default) where the plan\n"
"                       offloads nothing; off issues every op\n"
"\n"
"Profile:\n"
"  --profile FILE       plan with this profile instead of measuring one\n"
"  --analytic-profile   plan with the analytic profile (no measuring pass)\n"
"  --profile-out FILE   write the profile used to FILE\n"
"\n"
"Backend:\n"
"%s"
"\n"
"Output:\n"
"  --csv FILE           one row per point (columns: man vdnn-bench(1))\n"
"  --json FILE          {\"net\", \"batch\", ..., \"points\": [...]}\n"
"  --plot FILE.svg      images/s against budget, one line per policy\n"
"  --quiet              no progress on stderr\n"
"  --help, --version\n"
VD_CLI_LIST_NETS_HELP
"\n"
"Exit status: 0 ok (infeasible points are rows, not errors), 2 usage, 3 spec,\n"
"4 io, 5 data, 7 device, 8 unsupported, 9 nomem, 10 numeric.\n",
            nets, DEFAULT_STEPS, pol, DEFAULT_POLICIES, MAX_ROUNDS, VD_CLI_BACKEND_HELP);
}

/* ---- options ------------------------------------------------------------- */

typedef struct opts {
    vd_cli_common c;            /* NET.yaml and the run setup (shared with vdnn-train) */
    int64_t steps, warmup, iters, rounds;
    const char *budgets, *policies;
    const char *csv, *json, *plot;
    vd_policy pol[VD_POLICY_COUNT];
    int n_pol;
} opts;

static const vd_cli_flag FLAGS[] = {
    {"batch", true}, {"budgets", true}, {"steps", true}, {"policies", true}, {"prefetch", true}, {"chunks", true},
    {"freeze", true},
    {"warmup", true}, {"iters", true}, {"rounds", true}, {"seed", true}, {"optimizer", true},
    {"backend", true},
    {"device", true},
    {"math", true}, {"deterministic", false}, {"profile", true}, {"analytic-profile", false},
    {"profile-out", true}, {"csv", true}, {"json", true}, {"plot", true}, {"quiet", false},
    {"no-stage-input", false}, {"conv-tune", true}, {"conv-api", true}, {"conv-split", true},
    {"conv-topk", true}, {"conv-rtc", false}, {"conv-debug", true}, {"no-fuse", false}, {"sync-debug", false},
    {"graph", true}, {"help", false}, {"version", false}, {"list-nets", false},
};

/* "none,all,..." -> o->pol (each once, in the given order). */
static int parse_policies(const char *list, opts *o, vd_err *e) {
    o->n_pol = 0;
    const char *p = list;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        char w[64];
        if (n == 0 || n >= sizeof w)
            return vd_errf(e, VD_EUSAGE, "--policies: empty or overlong item in '%s'", list);
        memcpy(w, p, n);
        w[n] = 0;
        vd_policy pol;
        int rc = vd_policy_parse(w, &pol, e);
        if (rc) return vd_err_prefix(e, "--policies");
        bool dup = false;
        for (int k = 0; k < o->n_pol; k++) dup |= o->pol[k] == pol;
        if (dup) return vd_errf(e, VD_EUSAGE, "--policies: '%s' is listed twice", w);
        o->pol[o->n_pol++] = pol;
        if (!c) break;
        p = c + 1;
    }
    return VD_OK;
}

/* vdnn-bench's own flags (vd_cli_tool_flag; ctx is the opts). */
static int bench_flag(void *ctx, const char *name, const char *val, vd_err *e) {
    opts *o = ctx;
    int rc = VD_OK;
    if (!strcmp(name, "steps")) rc = vd_cli_int(name, val, 1, MAX_BUDGETS, &o->steps, e);
    else if (!strcmp(name, "warmup")) rc = vd_cli_int(name, val, 0, 1 << 20, &o->warmup, e);
    else if (!strcmp(name, "iters")) rc = vd_cli_int(name, val, 1, 1 << 20, &o->iters, e);
    else if (!strcmp(name, "rounds")) rc = vd_cli_int(name, val, 1, MAX_ROUNDS, &o->rounds, e);
    else if (!strcmp(name, "budgets")) o->budgets = val;
    else if (!strcmp(name, "policies")) o->policies = val;
    else if (!strcmp(name, "csv")) o->csv = val;
    else if (!strcmp(name, "json")) o->json = val;
    else if (!strcmp(name, "plot")) o->plot = val;
    return rc;
}

/* Returns VD_OK, an error, or -1 for --help / --version (already printed). */
static int parse_args(int argc, char **argv, opts *o, vd_err *e) {
    memset(o, 0, sizeof *o);
    o->policies = DEFAULT_POLICIES;
    o->steps = DEFAULT_STEPS;
    o->warmup = 2;
    o->iters = 5;
    o->rounds = 1;
    int rc = vd_cli_parse(argc, argv, PROG, usage, FLAGS, (int)VD_ARRAY_LEN(FLAGS), &o->c,
                          bench_flag, o, e);
    if (rc) return rc;
    return parse_policies(o->policies, o, e);
}

/* ---- the sweep ----------------------------------------------------------- */

typedef struct point {
    uint64_t budget;            /* bytes (the pool) */
    vd_policy policy;
    bool feasible;
    bool measured;              /* feasible and its iterations ran */
    bool failed;                /* an error stopped it (note says which) */
    char offload_policy[16];    /* what decided the offloads (dyn: none/conv/all) */
    char note[400];             /* why infeasible, or the error that stopped the point */
    double iter_s, iter_min_s;  /* measured: mean and fastest timed iteration, over the rounds */
    double round_s[MAX_ROUNDS]; /* each round's mean timed iteration */
    double images_s;
    uint64_t pool_hwm, live_peak;
    bool has_device;
    uint64_t device_used;       /* max process usage during the point (driver) */
    uint64_t device_overhead;   /* what lived outside this point's pool when it was
                                   created (context, handles, setup, its pinned host
                                   buffers: they grow with its host store) */
    bool device_within;         /* device_used <= budget (rounded up) + device_overhead */
    uint64_t offload_bytes, prefetch_bytes; /* per iteration */
    int64_t recompute_ops;      /* forward ops re-run per iteration */
    int64_t replayed;           /* timed steps (all rounds) that replayed a captured graph */
    double offload_gb, prefetch_gb, copy_gbps;
    bool has_pred;
    double predicted_s, error_pct;
    bool has_bound;
    double bound_s;             /* vd_plan_copy_bound at the point's budget */
    bool has_plan;
    vd_plan plan;               /* made in the first round, kept through the last */
} point;

static void point_release(point *pt) {
    if (pt->has_plan) vd_plan_free(&pt->plan);
    pt->has_plan = false;
}

typedef struct bench {
    const opts *o;
    vd_net net;
    int batch;
    vd_config_run run;          /* the resolved configuration (config/config.h) */
    vd_session ses;
    bool have_ses;
    float *params;              /* [net.param_floats] initial weights */
    float *x;                   /* [batch * C*H*W] synthetic batch */
    int32_t *labels;            /* [batch] */
    uint64_t min_budget[VD_POLICY_COUNT]; /* smallest budget of each listed policy (0: not
                                           * searched, the budgets given without 'min') */
    uint64_t none_peak;         /* what policy none needs at its fastest (min_budgets) */
    uint64_t budgets[MAX_BUDGETS];
    int n_budgets;
    point *pts;                 /* [n_budgets * o->n_pol], budget-major */
    int n_pts;
} bench;

static void progress(const bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(const bench *b, const char *fmt, ...) {
    if (b->o->c.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", PROG);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
    va_end(ap);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Does the --budgets list name the word 'min'? */
static bool budgets_name_min(const char *list) {
    for (const char *p = list;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 3 && !strncmp(p, "min", 3)) return true;
        if (!c) return false;
        p = c + 1;
    }
}

/* Minimum budgets of the listed policies, where the sweep needs them (the
 * default sweep, or 'min' in --budgets: auto's is a search, tens of
 * seconds on ResNet-152), and of none (the peak: a build). */
static int min_budgets(bench *b, vd_err *e) {
    bool need_min = !b->o->budgets || budgets_name_min(b->o->budgets);
    for (int k = need_min ? 0 : b->o->n_pol; k <= b->o->n_pol; k++) {
        vd_policy p = k < b->o->n_pol ? b->o->pol[k] : VD_POLICY_NONE;
        vd_plan_opts po = b->run.plan;
        po.policy = p;
        vd_cli_plan_progress(&po, PROG, b->o->c.quiet);
        uint64_t m = 0;
        int rc = vd_plan_min_budget(&b->net, &b->ses.prof, &po, &m, e);
        if (rc) return vd_err_prefix(e, "smallest budget of policy %s", vd_policy_name(p));
        if (k < b->o->n_pol) { b->min_budget[p] = m; continue; }
        /* none's peak is what it needs at its fastest: with no budget to
         * meet, the build takes a smaller, slower variant where the faster
         * one's placement leaves gaps (the adds' shared gradients off:
         * ResNet-50 tf32 at its smallest budget of none, 20.52 GiB, 120.5 ms
         * predicted, 114.6 with room); under a budget this large it keeps
         * the faster one */
        po.budget = (uint64_t)1 << 50;
        vd_plan pl;
        vd_err te = {0};
        rc = vd_plan_build(&b->net, &b->ses.prof, &po, &pl, &te);
        if (rc == VD_OK && pl.hwm > m) m = VD_ALIGN_UP(pl.hwm, 256);
        if (rc == VD_OK || rc == VD_EBUDGET) vd_plan_free(&pl);
        else {
            *e = te;
            return vd_err_prefix(e, "policy none's need at its fastest");
        }
        b->none_peak = m;
    }
    return VD_OK;
}

/* The budgets of the sweep, ascending and distinct. */
static int make_budgets(bench *b, vd_err *e) {
    uint64_t lo = UINT64_MAX;
    for (int k = 0; k < b->o->n_pol; k++)
        if (b->min_budget[b->o->pol[k]] < lo) lo = b->min_budget[b->o->pol[k]];
    uint64_t hi = b->none_peak > lo ? b->none_peak : lo;
    int n = 0;
    if (!b->o->budgets) {
        int steps = (int)b->o->steps;
        for (int i = 0; i < steps; i++) {
            double f = steps > 1 ? (double)i / (steps - 1) : 1.0;
            uint64_t v = i == steps - 1 ? hi : lo + (uint64_t)((double)(hi - lo) * f);
            b->budgets[n++] = VD_ALIGN_UP(v, 256);
        }
    } else {
        const char *p = b->o->budgets;
        for (;;) {
            const char *c = strchr(p, ',');
            size_t len = c ? (size_t)(c - p) : strlen(p);
            char w[64];
            if (len == 0 || len >= sizeof w)
                return vd_errf(e, VD_EUSAGE, "--budgets: empty or overlong item in '%s'",
                               b->o->budgets);
            memcpy(w, p, len);
            w[len] = 0;
            uint64_t v;
            if (!strcmp(w, "min")) v = lo;
            else if (!strcmp(w, "peak")) v = b->none_peak;
            else {
                int rc = vd_parse_size(w, &v, e);
                if (rc) return vd_err_prefix(e, "--budgets (sizes like 12G, 512M, or min, peak)");
                if (v == 0) return vd_errf(e, VD_EUSAGE, "--budgets: '%s' is not positive", w);
            }
            if (n == MAX_BUDGETS)
                return vd_errf(e, VD_EUSAGE, "--budgets: more than %d budgets", MAX_BUDGETS);
            b->budgets[n++] = v;
            if (!c) break;
            p = c + 1;
        }
    }
    qsort(b->budgets, (size_t)n, sizeof b->budgets[0], cmp_u64);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || b->budgets[m - 1] != b->budgets[i]) b->budgets[m++] = b->budgets[i];
    b->n_budgets = m;
    return VD_OK;
}

/* Synthetic batch and initial weights, made once and uploaded at each point. */
static int make_inputs(bench *b, vd_err *e) {
    int64_t per = vd_net_out_numel(&b->net, -1);
    size_t np = (size_t)(b->net.param_floats > 0 ? b->net.param_floats : 1);
    b->params = vd_malloc(np * sizeof(float), e);
    b->x = vd_malloc((size_t)(per * b->batch) * sizeof(float), e);
    b->labels = vd_malloc((size_t)b->batch * sizeof(int32_t), e);
    if (!b->params || !b->x || !b->labels) return VD_ENOMEM;
    vd_net_init_params(&b->net, b->params, b->net.train.seed);
    vd_dataset *ds = NULL;
    int rc = vd_data_open("synthetic", &b->net, b->batch, b->net.train.seed, false, &ds, e);
    for (int i = 0; i < b->batch && !rc; i++)
        rc = vd_data_sample(ds, VD_SPLIT_TRAIN, i, 0, b->x + per * i, &b->labels[i], e);
    vd_data_close(&ds);
    return rc;
}

/* The batch of make_inputs (samples 0 .. batch-1 of the synthetic set)
 * generated on the device at every load and staging, as vdnn-train does with
 * synthetic data (vd_exec_can_synth): both tools then time the same work, no
 * host-to-device upload of the input. */
static int device_inputs(bench *b, vd_exec *ex, vd_err *e) {
    vd_dataset *ds = NULL;
    vd_loader *ld = NULL;
    int rc = vd_data_open("synthetic", &b->net, b->batch, b->net.train.seed, false, &ds, e);
    vd_loader_cfg lc = { .split = VD_SPLIT_TRAIN, .batch = b->batch, .shuffle = false,
                         .seed = b->net.train.seed, .start = 0, .synth_device = true };
    if (!rc) rc = vd_loader_create(&ld, ds, &lc, e);
    if (!rc) rc = vd_loader_next_synth(ld, vd_exec_input_synth(ex), vd_exec_input_labels(ex), e);
    vd_synth_batch *nb = !rc && vd_exec_stages(ex) ? vd_exec_next_synth(ex) : NULL;
    if (nb) {   /* the next batch: the same samples */
        const vd_synth_batch *ib = vd_exec_input_synth(ex);
        int64_t *idx = nb->index;
        *nb = *ib;
        nb->index = idx;
        memcpy(idx, ib->index, (size_t)ib->n * sizeof *idx);
        memcpy(vd_exec_next_labels(ex), vd_exec_input_labels(ex),
               (size_t)b->batch * sizeof(int32_t));
    }
    vd_loader_destroy(&ld);
    vd_data_close(&ds);
    return rc;
}

/* The point's plan into pt->plan (pt->has_plan) and its prediction and
 * bound; at: the progress line's prefix, bb: the budget printed. An
 * infeasible budget is pt->feasible false and VD_OK; any other error is
 * returned (and kept in pt->note). */
static int plan_point(bench *b, point *pt, const char *at, const char *bb, vd_err *e) {
    vd_plan_opts po = b->run.plan;
    po.policy = pt->policy;
    po.budget = pt->budget;
    vd_cli_plan_progress(&po, PROG, b->o->c.quiet);
    memset(&pt->plan, 0, sizeof pt->plan);
    int rc = vd_session_plan(&b->ses, &po, &pt->plan, e);
    if (rc == VD_EBUDGET) {
        pt->feasible = false;
        snprintf(pt->note, sizeof pt->note, "%s", e->msg);
        vd_plan_free(&pt->plan);
        progress(b, "%s budget %s, policy %s: infeasible", at, bb,
                 vd_policy_name(pt->policy));
        return VD_OK;
    }
    if (rc) {
        if (pt->plan.n_layers) vd_plan_free(&pt->plan);
        progress(b, "%s budget %s, policy %s: failed: %s", at, bb,
                 vd_policy_name(pt->policy), e->msg);
        vd_err_prefix(e, "budget %s, policy %s", bb, vd_policy_name(pt->policy));
        pt->failed = true;
        snprintf(pt->note, sizeof pt->note, "error: %s", e->msg);
        return rc;
    }
    pt->has_plan = true;
    pt->feasible = true;
    snprintf(pt->offload_policy, sizeof pt->offload_policy, "%s",
             vd_policy_name(pt->plan.offload_policy));
    pt->has_pred = pt->plan.sim.iter_s > 0;
    pt->predicted_s = pt->plan.sim.iter_s;
    vd_plan_bound bound;
    if ((rc = vd_plan_copy_bound(&b->net, &b->ses.prof, &pt->plan, pt->budget, &bound, e))) {
        pt->failed = true;
        snprintf(pt->note, sizeof pt->note, "error: %s", e->msg);
        point_release(pt);
        return rc;
    }
    pt->bound_s = bound.bound_s;
    pt->has_bound = isfinite(pt->bound_s) && pt->bound_s > 0;
    return VD_OK;
}

/* One point in round r: its plan (made in the first round, kept for the
 * others: the same inputs plan the same), executor, warm-up, timed
 * iterations, stats (the timings added to the earlier rounds'). An
 * infeasible budget is a row (feasible = no), not an error. Any other error
 * is returned (and kept in pt->note); the sweep goes on without the point.
 * The plan is released after the last round or an error. */
static int run_point(bench *b, point *pt, int idx, int r, vd_err *e) {
    const opts *o = b->o;
    char bb[32], at[64];
    vd_fmt_bytes(pt->budget, bb, sizeof bb);
    if (o->rounds > 1) snprintf(at, sizeof at, "[%d/%d, round %d/%lld]", idx + 1, b->n_pts, r + 1,
                                (long long)o->rounds);
    else snprintf(at, sizeof at, "[%d/%d]", idx + 1, b->n_pts);
    int rc = pt->has_plan ? VD_OK : plan_point(b, pt, at, bb, e);
    if (rc || !pt->feasible) return rc;
    const vd_plan *plan = &pt->plan;

    vd_exec *ex = NULL;
    vd_session_mem_reset(&b->ses);
    rc = vd_session_exec(&b->ses, plan, false, &ex, e);
    if (!rc) rc = vd_exec_set_state(ex, b->params, NULL, 0, e);
    bool dev = !rc && vd_exec_can_synth(ex);
    if (dev) rc = device_inputs(b, ex, e);
    if (!rc && !dev) {
        /* the same batch every iteration; with input staging both input
         * buffers hold it and every step stages the next (identical) batch,
         * so the measured iterations include the overlapped upload */
        size_t nx = (size_t)(vd_net_out_numel(&b->net, -1) * b->batch);
        vd_dtype dt = vd_exec_input_dtype(ex);
        bool bf = dt != VD_DT_F32;   /* 16-bit elements (their order does not matter here) */
        if (bf) vd_f32_to_h16_n(dt, b->x, vd_exec_input_x(ex), nx);
        else memcpy(vd_exec_input_x(ex), b->x, nx * sizeof(float));
        memcpy(vd_exec_input_labels(ex), b->labels, (size_t)b->batch * sizeof(int32_t));
        if (vd_exec_stages(ex)) {
            if (bf) vd_f32_to_h16_n(dt, b->x, vd_exec_next_x(ex), nx);
            else memcpy(vd_exec_next_x(ex), b->x, nx * sizeof(float));
            memcpy(vd_exec_next_labels(ex), b->labels, (size_t)b->batch * sizeof(int32_t));
        }
    }
    float lr = b->net.train.lr, loss = 0;   /* vd_config_resolve's */
    int64_t it = 0;
    for (int64_t k = 0; k < o->warmup && !rc; k++) {
        vd_exec_next_ready(ex);
        rc = vd_exec_train_step(ex, lr, it++, &loss, e);
    }
    /* a captured iteration: warm up on until a step replays its graph, so
     * that no timed step captures one (a capture and its graph's
     * instantiation cost milliseconds; the first replay comes after every
     * key the steps alternate between is captured: vd_exec_captures) */
    for (int64_t k = 0; k < BENCH_CAPTURE_WARMUP && !rc && vd_exec_captures(ex); k++) {
        vd_exec_stats st;
        vd_exec_get_stats(ex, &st);
        if (st.graph_launches > st.graph_captures) break;
        vd_exec_next_ready(ex);
        rc = vd_exec_train_step(ex, lr, it++, &loss, e);
    }
    vd_session_mem_sample(&b->ses);
    double sum = 0, best = r > 0 ? pt->iter_min_s : INFINITY;
    vd_exec_stats st0;
    vd_exec_get_stats(ex, &st0);
    for (int64_t k = 0; k < o->iters && !rc; k++) {
        vd_exec_next_ready(ex);
        rc = vd_exec_train_step(ex, lr, it++, &loss, e);
        vd_exec_stats st;
        vd_exec_get_stats(ex, &st);
        sum += st.last_iter_s;
        if (st.last_iter_s < best) best = st.last_iter_s;
        if (k == 0 || k == o->iters - 1) vd_session_mem_sample(&b->ses);
    }
    if (!rc) {
        vd_exec_stats st;
        vd_exec_get_stats(ex, &st);
        pt->round_s[r] = sum / (double)o->iters;
        double rounds_sum = 0;   /* every round times o->iters iterations: their means' mean */
        for (int k = 0; k <= r; k++) rounds_sum += pt->round_s[k];
        pt->iter_s = rounds_sum / (r + 1);
        pt->iter_min_s = best;
        pt->images_s = pt->iter_s > 0 ? b->batch / pt->iter_s : 0;
        pt->pool_hwm = st.pool_hwm;
        pt->live_peak = st.live_peak;
        pt->offload_bytes = st.offload_bytes_iter;
        pt->prefetch_bytes = st.prefetch_bytes_iter;
        pt->recompute_ops = st.recompute_ops_iter;
        pt->replayed += (st.graph_launches - st.graph_captures) -
                        (st0.graph_launches - st0.graph_captures);
        pt->offload_gb = (double)st.offload_bytes_iter / 1e9;
        pt->prefetch_gb = (double)st.prefetch_bytes_iter / 1e9;
        pt->copy_gbps = pt->iter_s > 0 ? (pt->offload_gb + pt->prefetch_gb) / pt->iter_s : 0;
        pt->error_pct = pt->has_pred ? 100.0 * (pt->iter_s - pt->predicted_s) / pt->predicted_s : 0;
        vd_session_mem_report mr;
        vd_session_mem_check(&b->ses, plan->budget, &mr);
        /* the device memory: the round that used the most */
        if (r == 0 || (mr.known && mr.used_max > pt->device_used)) {
            pt->has_device = mr.known;
            pt->device_used = mr.used_max;
            pt->device_overhead = mr.overhead;
            pt->device_within = mr.within;
        }
        progress(b, "%s budget %s, policy %s: %.4f s/iter, %.1f img/s (predicted %.4f s)", at,
                 bb, vd_policy_name(pt->policy), pt->round_s[r], b->batch / pt->round_s[r],
                 pt->predicted_s);
        pt->measured = true;
    } else {
        pt->measured = false;   /* a later round's failure: no partial means */
        progress(b, "%s budget %s, policy %s: failed: %s", at, bb,
                 vd_policy_name(pt->policy), e->msg);
        vd_err_prefix(e, "budget %s, policy %s", bb, vd_policy_name(pt->policy));
        pt->failed = true;
        snprintf(pt->note, sizeof pt->note, "error: %s", e->msg);
    }
    vd_exec_destroy(&ex);
    if (rc || r == o->rounds - 1) point_release(pt);
    return rc;
}

/* ---- output -------------------------------------------------------------- */

/* The run's math: --math, else the spec's train.math (vd_config_resolve
 * put the choice into net.train.math). */
static const char *math_name(const bench *b) {
    return vd_math_name(b->net.train.math);
}

/* The results as a JSON object; NULL when out of memory. Numbers that
 * were not measured (or are not finite) are null. */
static json_t *bench_json(const bench *b) {
    const opts *o = b->o;
    bool ok = true;
    json_t *r = json_pack("{s:o, s:i, s:s, s:s, s:b, s:s, s:o, s:I, s:I}",
                          "net", vd_json_text(b->net.name), "batch", b->batch,
                          "backend", b->ses.be->name, "math", math_name(b),
                          "deterministic", (int)o->c.cfg.deterministic,
                          "prefetch", vd_prefetch_name(o->c.cfg.prefetch),
                          "profile", vd_json_text(b->ses.prof.source),
                          "warmup", (json_int_t)o->warmup, "iters", (json_int_t)o->iters);
    vd_json_set(r, "rounds", json_integer(o->rounds), &ok);
    vd_json_set(r, "input", json_pack("{s:i, s:i, s:i, s:i}", "channels", b->net.in_c, "height",
                                      b->net.in_h, "width", b->net.in_w, "classes", b->net.classes),
                &ok);
    bool dk = b->ses.mem.known;
    vd_json_set(r, "device_total", dk ? vd_json_uint(b->ses.mem.total) : json_null(), &ok);
    vd_json_set(r, "overhead_bytes", dk ? vd_json_uint(b->ses.mem.used_setup) : json_null(), &ok);
    vd_json_set(r, "none_peak", vd_json_uint(b->none_peak), &ok);
    json_t *mb = json_object();
    vd_json_set(r, "min_budgets", mb, &ok);
    for (int k = 0; k < o->n_pol; k++)
        if (b->min_budget[o->pol[k]])
            vd_json_set(mb, vd_policy_name(o->pol[k]), vd_json_uint(b->min_budget[o->pol[k]]), &ok);
    json_t *pts = json_array();
    vd_json_set(r, "points", pts, &ok);
    for (int i = 0; ok && i < b->n_pts; i++) {
        const point *p = &b->pts[i];
        bool m = p->measured, md = m && p->has_device, mp = m && p->has_pred;
        json_t *null = json_null();     /* a singleton: never fails, needs no release */
        json_t *pj = json_pack(
            "{s:o, s:s, s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
            " s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
            "budget_bytes", vd_json_uint(p->budget), "policy", vd_policy_name(p->policy),
            "feasible", (int)p->feasible, "failed", (int)p->failed,
            "offload_policy", m ? vd_json_text(p->offload_policy) : null,
            "iter_s", m ? vd_json_real(p->iter_s) : null,
            "iter_min_s", m ? vd_json_real(p->iter_min_s) : null,
            "images_s", m ? vd_json_real(p->images_s) : null,
            "pool_hwm", m ? vd_json_uint(p->pool_hwm) : null,
            "live_peak", m ? vd_json_uint(p->live_peak) : null,
            "device_used", md ? vd_json_uint(p->device_used) : null,
            "overhead_bytes", md ? vd_json_uint(p->device_overhead) : null,
            "device_within", md ? json_boolean(p->device_within) : null,
            "offload_bytes", m ? vd_json_uint(p->offload_bytes) : null,
            "prefetch_bytes", m ? vd_json_uint(p->prefetch_bytes) : null,
            "recompute_ops", m ? json_integer(p->recompute_ops) : null,
            "replayed", m ? json_integer(p->replayed) : null,
            "offload_gb", m ? vd_json_real(p->offload_gb) : null,
            "prefetch_gb", m ? vd_json_real(p->prefetch_gb) : null,
            "copy_gbps", m ? vd_json_real(p->copy_gbps) : null,
            "predicted_s", mp ? vd_json_real(p->predicted_s) : null,
            "error_pct", mp ? vd_json_real(p->error_pct) : null,
            "bound_s", m && p->has_bound ? vd_json_real(p->bound_s) : null,
            "note", vd_json_text(p->note));
        json_t *rs = m ? json_array() : null;   /* each round's mean timed iteration */
        for (int k = 0; m && k < o->rounds; k++) vd_json_push(rs, vd_json_real(p->round_s[k]), &ok);
        vd_json_set(pj, "round_s", rs, &ok);
        vd_json_push(pts, pj, &ok);
    }
    if (!ok) { json_decref(r); return NULL; }
    return r;
}

/* --json FILE: the results (bench_json), replaced atomically. */
static int write_json(const char *path, const bench *b, vd_err *e) {
    json_t *r = bench_json(b);
    if (!r) return vd_errf(e, VD_ENOMEM, "out of memory formatting %s", path);
    int rc = vd_json_save(path, r, e);
    json_decref(r);
    return rc;
}

static const char *const CSV_HEADER =
    "budget_bytes,budget_gib,policy,feasible,offload_policy,iter_s,iter_min_s,images_s,"
    "pool_hwm,live_peak,device_used,offload_gb,prefetch_gb,copy_gbps,predicted_s,error_pct,bound_s,note";

static void csv_num(FILE *f, bool have, double v, const char *fmt) {
    fputc(',', f);
    if (have && isfinite(v)) fprintf(f, fmt, v);
}

static void write_csv(FILE *f, const bench *b) {
    fprintf(f, "%s\n", CSV_HEADER);
    for (int i = 0; i < b->n_pts; i++) {
        const point *p = &b->pts[i];
        bool m = p->measured;
        fprintf(f, "%" PRIu64 ",%.6f,%s,%s,%s", p->budget, (double)p->budget / 1073741824.0,
                vd_policy_name(p->policy), p->feasible ? "yes" : "no", m ? p->offload_policy : "");
        csv_num(f, m, p->iter_s, "%.9g");
        csv_num(f, m, p->iter_min_s, "%.9g");
        csv_num(f, m, p->images_s, "%.9g");
        csv_num(f, m, (double)p->pool_hwm, "%.0f");
        csv_num(f, m, (double)p->live_peak, "%.0f");
        csv_num(f, m && p->has_device, (double)p->device_used, "%.0f");
        csv_num(f, m, p->offload_gb, "%.9g");
        csv_num(f, m, p->prefetch_gb, "%.9g");
        csv_num(f, m, p->copy_gbps, "%.9g");
        csv_num(f, m && p->has_pred, p->predicted_s, "%.9g");
        csv_num(f, m && p->has_pred, p->error_pct, "%.6g");
        csv_num(f, m && p->has_bound, p->bound_s, "%.9g");
        fputs(",\"", f);
        for (const char *s = p->note; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s == '\n' ? ' ' : *s, f);
        }
        fputs("\"\n", f);
    }
}

/* ---- SVG plot: images/s against budget, one line per policy --------------- */

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A "nice" tick step (1, 2 or 5 x 10^k) for about n ticks over span. */
static double nice_step(double span, int n) {
    if (!(span > 0)) return 1;
    double raw = span / n, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

static void fmt_tick(double v, double step, char *buf, size_t n) {
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 6) dec = 6;
    snprintf(buf, n, "%.*f", dec, v);
}

static void write_svg(FILE *f, const bench *b) {
    const opts *o = b->o;
    static const char *const COLORS[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                          "#9467bd", "#8c564b", "#e377c2", "#17becf" };
    const double W = 800, H = 500, L = 80, R = 170, T = 50, B = 60;
    const double pw = W - L - R, ph = H - T - B;
    /* x unit: GiB unless every budget is below 1 GiB (small nets) */
    uint64_t bmax = b->n_budgets ? b->budgets[b->n_budgets - 1] : 1;
    double unit = 1073741824.0;
    const char *uname = "GiB";
    if (bmax < (1ull << 30)) { unit = 1048576.0; uname = "MiB"; }
    if (bmax < (1ull << 20)) { unit = 1024.0; uname = "KiB"; }
    double x0 = b->n_budgets ? b->budgets[0] / unit : 0, x1 = bmax / unit;
    double xs = nice_step(x1 - x0 > 0 ? x1 - x0 : (x1 > 0 ? x1 : 1), 6);
    double xlo = floor(x0 / xs) * xs, xhi = ceil(x1 / xs) * xs;
    if (xhi <= xlo) { xlo -= xs; xhi += xs; }
    if (xlo < 0) xlo = 0;
    double ymax = 0;
    for (int i = 0; i < b->n_pts; i++)
        if (b->pts[i].measured && b->pts[i].images_s > ymax) ymax = b->pts[i].images_s;
    double ys = nice_step(ymax > 0 ? ymax * 1.05 : 1, 5);
    double yhi = ceil((ymax > 0 ? ymax * 1.05 : 1) / ys) * ys;
#define PX(v) (L + ((v) - xlo) / (xhi - xlo) * pw)
#define PY(v) (T + ph - (v) / yhi * ph)
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">vdnn-bench: ",
            L + pw / 2);
    xml_text(f, b->net.name);
    fprintf(f, ", batch %d, %s, %s</text>\n", b->batch, b->ses.be->name, math_name(b));
    /* grid and ticks */
    fprintf(f, "<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
    int nx = (int)floor((xhi - xlo) / xs + 0.5), ny = (int)floor(yhi / ys + 0.5);
    for (int i = 0; i <= nx; i++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", PX(xlo + i * xs), T,
                PX(xlo + i * xs), T + ph);
    for (int i = 0; i <= ny; i++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", L, PY(i * ys),
                L + pw, PY(i * ys));
    fprintf(f, "</g>\n<g text-anchor=\"middle\">\n");
    char t[64];
    for (int i = 0; i <= nx; i++) {
        double v = xlo + i * xs;
        fmt_tick(v, xs, t, sizeof t);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", PX(v), T + ph + 18, t);
    }
    fprintf(f, "</g>\n<g text-anchor=\"end\">\n");
    for (int i = 0; i <= ny; i++) {
        double v = i * ys;
        fmt_tick(v, ys, t, sizeof t);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", L - 6, PY(v) + 4, t);
    }
    fprintf(f, "</g>\n");
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"black\"/>\n", L, T, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">device memory budget (%s)"
            "</text>\n",
            L + pw / 2, H - 18, uname);
    fprintf(f, "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)\">"
            "images/s</text>\n", T + ph / 2, T + ph / 2);
    /* one line per policy (feasible points, ascending budget) + markers */
    for (int k = 0; k < o->n_pol; k++) {
        const char *col = COLORS[k % VD_ARRAY_LEN(COLORS)];
        const char *name = vd_policy_name(o->pol[k]);
        fprintf(f, "<polyline class=\"policy\" data-policy=\"%s\" fill=\"none\" stroke=\"%s\" "
                "stroke-width=\"2\" points=\"", name, col);
        int np = 0;
        for (int i = 0; i < b->n_pts; i++) {
            const point *p = &b->pts[i];
            if (p->policy != o->pol[k] || !p->measured) continue;
            fprintf(f, "%s%.1f,%.1f", np++ ? " " : "", PX(p->budget / unit), PY(p->images_s));
        }
        fprintf(f, "\"/>\n<g fill=\"%s\">\n", col);
        for (int i = 0; i < b->n_pts; i++) {
            const point *p = &b->pts[i];
            if (p->policy != o->pol[k] || !p->measured) continue;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"><title>%s, %.3f %s: %.1f "
                    "images/s</title></circle>\n", PX(p->budget / unit), PY(p->images_s), name,
                    p->budget / unit, uname, p->images_s);
        }
        fprintf(f, "</g>\n");
        double ly = T + 10 + 22 * k;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\"/>\n<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                L + pw + 16, ly, L + pw + 46, ly, col, L + pw + 52, ly + 4, name);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#555555\">missing point:"
            "</text>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#555555\">does not fit"
            "</text>\n", L + pw + 16, T + 22.0 * o->n_pol + 16, L + pw + 16,
            T + 22.0 * o->n_pol + 29);
    fprintf(f, "</svg>\n");
#undef PX
#undef PY
}

/* The CSV and the SVG plot as vd_stream_writers (ctx is the bench). */
static int csv_writer(FILE *f, const void *b, vd_err *e) { write_csv(f, b); return VD_OK; }
static int svg_writer(FILE *f, const void *b, vd_err *e) { write_svg(f, b); return VD_OK; }

/* A budget for the table: vd_fmt_bytes, or 4 decimals when that would
 * print two different budgets of the sweep alike (small nets). */
static char *fmt_budget(const bench *b, uint64_t v, char *buf, size_t n) {
    bool fine = false;
    for (int i = 1; i < b->n_budgets && !fine; i++) {
        char x[32], y[32];
        vd_fmt_bytes(b->budgets[i - 1], x, sizeof x);
        vd_fmt_bytes(b->budgets[i], y, sizeof y);
        fine = strcmp(x, y) == 0;
    }
    if (!fine) return vd_fmt_bytes(v, buf, n);
    static const char *const U[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double d = (double)v;
    int u = 0;
    while (d >= 1024 && u < 4) { d /= 1024; u++; }
    snprintf(buf, n, "%.4f %s", d, U[u]);
    return buf;
}

static void print_table(const bench *b) {
    printf("%s, batch %d, backend %s, math %s, profile %s; %lld warm-up + %lld timed "
           "iterations per point", b->net.name, b->batch, b->ses.be->name, math_name(b),
           b->ses.prof.source, (long long)b->o->warmup, (long long)b->o->iters);
    if (b->o->rounds > 1)
        printf(" in each of %lld rounds (s/iter: their mean)", (long long)b->o->rounds);
    printf("\n");
    printf("%-12s %-7s %-8s %9s %9s %11s %11s %9s %9s %10s %7s %9s\n", "budget", "policy",
           "feasible", "s/iter", "img/s", "pool hwm", "device", "offload", "copy", "predicted",
           "error", "bound");
    printf("%-12s %-7s %-8s %9s %9s %11s %11s %9s %9s %10s %7s %9s\n", "", "", "", "", "", "",
           "used", "GB/iter", "GB/s", "s/iter", "", "s/iter");
    char a[32], h[32], d[32];
    for (int i = 0; i < b->n_pts; i++) {
        const point *p = &b->pts[i];
        fmt_budget(b, p->budget, a, sizeof a);
        if (!p->measured) {
            printf("%-12s %-7s %-8s %9s %9s %11s %11s %9s %9s %10s %7s %9s\n", a,
                   vd_policy_name(p->policy), p->feasible ? "yes" : "no",
                   p->failed ? "failed" : "-", "-", "-", "-", "-", "-", "-", "-", "-");
            continue;
        }
        vd_fmt_bytes(p->pool_hwm, h, sizeof h);
        if (p->has_device) {
            vd_fmt_bytes(p->device_used, d, sizeof d);
            if (!p->device_within) strncat(d, "!", sizeof d - strlen(d) - 1);
        }
        else snprintf(d, sizeof d, "-");
        char pred[32] = "-", err[32] = "-", bnd[32] = "-";
        if (p->has_pred) {
            snprintf(pred, sizeof pred, "%.4f", p->predicted_s);
            snprintf(err, sizeof err, "%+.1f%%", p->error_pct);
        }
        if (p->has_bound) snprintf(bnd, sizeof bnd, "%.4f", p->bound_s);
        printf("%-12s %-7s %-8s %9.4f %9.1f %11s %11s %9.3f %9.2f %10s %7s %9s\n", a,
               vd_policy_name(p->policy), "yes", p->iter_s, p->images_s, h, d, p->offload_gb,
               p->copy_gbps, pred, err, bnd);
    }
    if (b->ses.mem.known) {
        /* The overhead is per point: it includes the point's pinned host
         * buffers, whose driver mappings grow with its host store. */
        uint64_t lo = UINT64_MAX, hi = 0;
        for (int i = 0; i < b->n_pts; i++) {
            const point *p = &b->pts[i];
            if (!p->measured || !p->has_device) continue;
            if (p->device_overhead < lo) lo = p->device_overhead;
            if (p->device_overhead > hi) hi = p->device_overhead;
        }
        char o1[32], o2[32], t1[32];
        printf("device used = the process's device memory from the driver (max over the "
               "point), of %s; '!' = more than the budget plus what was outside the pool "
               "when it was created, its page tables, kernel code loaded at first use and the "
               "captured iteration's graphs (vdnn-train(1), DEVICE MEMORY)\n",
               vd_fmt_bytes(b->ses.mem.total, t1, sizeof t1));
        if (hi > 0 && lo == hi)
            printf("outside the pool (context, handles, setup, pinned host buffers): %s\n",
                   vd_fmt_bytes(lo, o1, sizeof o1));
        else if (hi > 0)
            printf("outside the pool (context, handles, setup, pinned host buffers: grows with "
                   "the host store): %s to %s by point\n", vd_fmt_bytes(lo, o1, sizeof o1),
                   vd_fmt_bytes(hi, o2, sizeof o2));
    }
    printf("copy GB/s = (offloaded + prefetched bytes per iteration) / measured iteration time\n");
    printf("bound = the planner's lower bound at the budget: no plan there is predicted faster "
           "(the passes' fastest options that fit, and the copies or recomputes of what must "
           "leave the device; vdnn-plan(1), LOWER BOUND)\n");
    for (int i = 0; i < b->n_pts; i++)
        if (!b->pts[i].measured)
            printf("%s: %s, %s: %s\n", b->pts[i].failed ? "failed" : "does not fit",
                   fmt_budget(b, b->pts[i].budget, a, sizeof a),
                   vd_policy_name(b->pts[i].policy), b->pts[i].note);
}

/* ---- main ------------------------------------------------------------------ */

/* The spec, the resolved setup, the outputs checked, the session open. */
static int set_up(bench *b, const opts *o, vd_err *e) {
    int rc = vd_spec_load(o->c.spec, &b->net, e);
    if (rc) return rc;
    if (o->c.has_seed) b->net.train.seed = (uint64_t)o->c.seed;
    /* batch, backend, profile source, ... (config/config.h) */
    if ((rc = vd_config_resolve(&o->c.cfg, &b->net, false, &b->run, e))) return rc;
    /* SIGINT, SIGTERM, SIGHUP: the setup and the sweep stop at their next
     * check (exit 128 + the signal); no output is written then */
    b->run.session.backend_opts.stop = vd_cli_catch_stop();
    b->batch = b->run.batch;
    /* the outputs are written after the sweep: check them before it */
    const char *outs[][2] = { { "--csv", o->csv }, { "--json", o->json }, { "--plot", o->plot } };
    vd_run_path rp[3];
    for (int k = 0; k < 3; k++)
        rp[k] = (vd_run_path){ .flag = outs[k][0], .path = outs[k][1], .output = true };
    if ((rc = vd_cli_check_paths(&o->c, rp, 3, e))) return rc;
    for (int k = 0; k < 3; k++)
        if (outs[k][1] && (rc = vd_output_check(outs[k][1], e))) {
            vd_err_prefix(e, "%s", outs[k][0]);
            return rc;
        }
    progress(b, "setting up %s at batch %d and %s the profile...", b->net.name, b->batch,
             o->c.cfg.profile ? "loading" : "making");
    rc = vd_session_open(&b->ses, &b->net, b->batch, &b->run.session, e);
    b->have_ses = rc == VD_OK;
    if (!rc) rc = vd_cli_stop_check("after profiling", e);
    if (rc) return rc;
    if (b->ses.backend_why)
        progress(b, "backend %s (auto: %s)", b->ses.be->name, b->ses.backend_why);
    progress(b, "profile %s (%s, %.1f s)", b->ses.prof.source, b->ses.prof_how, b->ses.prof_s);
    vd_cli_note_raised(&b->ses, PROG, o->c.quiet);
    return VD_OK;
}

/* Every budget x policy point, --rounds times in turn. A point that fails
 * is a row saying why; the sweep goes on without it, and *n_failed counts
 * them, the first one's error in *point_rc and *pe. Returns what stops the
 * sweep (a stop signal, memory). */
static int sweep(bench *b, const opts *o, int *n_failed, int *point_rc, vd_err *pe, vd_err *e) {
    int rc;
    if ((rc = min_budgets(b, e)) || (rc = make_budgets(b, e)) || (rc = make_inputs(b, e)))
        return rc;
    char m[32], p[32], q[32];
    progress(b, "%d budget%s x %d polic%s: %s .. %s (none's peak %s)", b->n_budgets,
             b->n_budgets == 1 ? "" : "s", o->n_pol, o->n_pol == 1 ? "y" : "ies",
             vd_fmt_bytes(b->budgets[0], m, sizeof m),
             vd_fmt_bytes(b->budgets[b->n_budgets - 1], q, sizeof q),
             vd_fmt_bytes(b->none_peak, p, sizeof p));
    b->n_pts = b->n_budgets * o->n_pol;
    b->pts = vd_calloc((size_t)b->n_pts, sizeof *b->pts, e);
    if (!b->pts) return VD_ENOMEM;
    for (int i = 0; i < b->n_pts; i++) {
        b->pts[i].budget = b->budgets[i / o->n_pol];
        b->pts[i].policy = o->pol[i % o->n_pol];
    }
    for (int r = 0; r < o->rounds; r++)
        for (int i = 0; i < b->n_pts; i++) {
            if ((rc = vd_cli_stop_check("during the sweep", e))) return rc;
            point *pt = &b->pts[i];
            if (r > 0 && !pt->measured) continue;   /* infeasible, or failed */
            vd_err err = {0};
            int prc = run_point(b, pt, i, r, &err);
            if (prc && !*n_failed) {
                *point_rc = prc;
                *pe = err;
            }
            *n_failed += prc != 0;
        }
    return VD_OK;
}

/* The table on stdout, then --csv, --json, --plot. */
static int write_outputs(const bench *b, const opts *o, vd_err *e) {
    print_table(b);
    int rc;
    if (o->csv && (rc = vd_write_stream_atomic(o->csv, csv_writer, b, e))) return rc;
    if (o->json && (rc = write_json(o->json, b, e))) return rc;
    if (o->plot && (rc = vd_write_stream_atomic(o->plot, svg_writer, b, e))) return rc;
    if (o->csv) progress(b, "wrote %s", o->csv);
    if (o->json) progress(b, "wrote %s", o->json);
    if (o->plot) progress(b, "wrote %s", o->plot);
    return VD_OK;
}

int main(int argc, char **argv) {
    opts o;
    vd_err e = {0};
    int rc = parse_args(argc, argv, &o, &e);
    if (rc < 0) return 0;
    if (rc) return vd_cli_fail(PROG, &e);
    bench b;
    memset(&b, 0, sizeof b);
    b.o = &o;
    vd_net_init(&b.net);
    int n_failed = 0, point_rc = 0;
    vd_err point_err = {0};
    if (!(rc = set_up(&b, &o, &e)) && !(rc = sweep(&b, &o, &n_failed, &point_rc, &point_err, &e)) &&
        !(rc = write_outputs(&b, &o, &e)) && n_failed) {
        rc = point_rc;
        e = point_err;
        vd_err_prefix(&e, "%d point%s failed (their rows say why); the first", n_failed,
                      n_failed == 1 ? "" : "s");
    }
    for (int i = 0; b.pts && i < b.n_pts; i++) point_release(&b.pts[i]);   /* a stopped sweep's */
    vd_free(b.pts);
    vd_free(b.params);
    vd_free(b.x);
    vd_free(b.labels);
    if (b.have_ses) vd_session_close(&b.ses);
    vd_config_run_free(&b.run);
    vd_net_free(&b.net);
    if (rc == VD_ESTOP) return vd_cli_stopped(PROG, &e);
    return rc ? vd_cli_fail(PROG, &e) : 0;
}
