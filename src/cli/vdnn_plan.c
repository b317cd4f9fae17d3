/* vdnn_plan.c — vdnn-plan: show the memory plan vdnn-train would run.
 *
 *   vdnn-plan NET.yaml [--batch B] [--budget SIZE] [--policy P]
 *             [--prefetch auto|paper] [--profile F | --gpu-model h200|cpu |
 *             --backend cpu|cuda|auto [--device N]] [--format table|json]
 *             [--trace FILE] [--profile-out FILE] [--min-budget] [--summary]
 *             [--help] [--version]
 *
 * The command line is parsed and resolved as vdnn-train's (cli_common.h,
 * config/config.h): with --backend the plan is made from the same session
 * (backend, layer setup, profile) as vdnn-train's, so it is the plan
 * vdnn-train runs. Documented in man/vdnn-plan.1. Only this file prints
 * and exits. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli_common.h"
#include "config/config.h"
#include "net/net.h"
#include "plan/plan.h"
#include "spec/spec.h"
#include "spec/summary.h"
#include "train/session.h"
#include "util/json.h"

static const char *const PROG = "vdnn-plan";

static void usage(FILE *f) {
    char pol[160];
    vd_cli_policies(pol, sizeof pol);
    fprintf(f,
        "usage: vdnn-plan NET.yaml [options]\n"
        "\n"
        "Plan vDNN memory management for a net: which feature maps to offload to\n"
        "host memory (and when to prefetch them back) or to recompute in the\n"
        "backward pass, where every tensor lives in the device pool, and the\n"
        "predicted iteration time.\n"
        "\n"
        "options:\n"
        "  --batch B            batch size (default: the spec's train.batch, else 32;\n"
        "                       with --gpus N the global batch)\n"
        "  --gpus N             data parallel: plan one rank of N (batch B/N under\n"
        "                       --budget on its own GPU) and add the gradients'\n"
        "                       all-reduce, overlapped with the backward pass\n"
        "  --budget SIZE        device memory budget, e.g. 12G, 512M (default: the\n"
        "                       device's memory: all a CUDA device can give, the plan's\n"
        "                       own need on cpu, the model's memory for h200; a cap:\n"
        "                       the plan's pool is what it needs)\n"
        "  --policy P           %s\n"
        "                       (none | all | conv | dyn: the paper's; auto: ours, per\n"
        "                       tensor keep/offload/recompute, searched with the\n"
        "                       simulator); default auto = none when the net fits\n"
        "  --prefetch M         auto (ours, from the profile) | paper (default auto)\n"
        "  --profile FILE       measured/edited profile (JSON, see vdnn-plan(1))\n"
        "  --gpu-model M        plan for a device model: h200 | cpu (analytic profile;\n"
        "                       the default without --backend and --profile: h200)\n"
        "  --backend B          plan with this backend's own profile, exactly as\n"
        "                       vdnn-train --backend B runs (cpu | cuda | auto; cuda\n"
        "                       measures it unless --analytic-profile or --profile)\n"
        "  --analytic-profile   with --backend cuda: the analytic profile, no measuring\n"
        "  --format F           table | json (default table)\n"
        "  --trace FILE         write a Chrome trace (open in Perfetto / chrome://tracing)\n"
        "  --profile-out FILE   write the profile used, as JSON (alias --save-profile)\n"
        "  --min-budget         print the smallest budget of every policy\n"
        "  --summary            print the per-layer net summary and exit\n"
        "  --quiet              no progress on stderr (a search running over a\n"
        "                       second prints what it searches and its best plan)\n"
        "  --help, --version\n"
        "\n"
        "backend (with --backend):\n"
        "%s"
        "\n"
        "exit status: 0 ok, 1 internal error, 2 usage, 3 spec, 4 io, 5 data,\n"
        "6 budget does not fit, 7 device, 8 unsupported, 9 out of memory\n",
        pol, VD_CLI_BACKEND_HELP);
}

typedef struct opts {
    vd_cli_common c;
    bool json, want_min, want_summary;
    const char *trace;
} opts;

static const vd_cli_flag FLAGS[] = {
    {"batch", true}, {"gpus", true}, {"budget", true}, {"policy", true}, {"prefetch", true},
    {"profile", true}, {"gpu-model", true}, {"backend", true}, {"device", true},
    {"analytic-profile", false}, {"math", true}, {"deterministic", false},
    {"no-stage-input", false}, {"conv-tune", true}, {"conv-api", true}, {"conv-split", true},
    {"conv-topk", true}, {"conv-rtc", false}, {"conv-debug", true}, {"sync-debug", false},
    {"format", true}, {"trace", true}, {"profile-out", true}, {"save-profile", true},
    {"min-budget", false}, {"summary", false}, {"quiet", false}, {"help", false}, {"version", false},
};

/* vdnn-plan's own flags (vd_cli_tool_flag; ctx is the opts). */
static int plan_flag(void *ctx, const char *name, const char *val, vd_err *e) {
    opts *o = ctx;
    int rc = VD_OK;
    if (!strcmp(name, "format")) {
        static const char *const ch[] = {"table", "json"};
        if (!(rc = vd_cli_choice(name, val, ch, 2, e))) o->json = !strcmp(val, "json");
    } else if (!strcmp(name, "trace")) o->trace = val;
    else if (!strcmp(name, "save-profile")) o->c.cfg.profile_out = val;
    else if (!strcmp(name, "min-budget")) o->want_min = true;
    else if (!strcmp(name, "summary")) o->want_summary = true;
    return rc;
}

/* Returns VD_OK, an error, or -1 for --help / --version (already printed). */
static int parse_args(int argc, char **argv, opts *o, vd_err *e) {
    memset(o, 0, sizeof *o);
    int rc = vd_cli_parse(argc, argv, PROG, usage, FLAGS, (int)VD_ARRAY_LEN(FLAGS), &o->c,
                          plan_flag, o, e);
    if (rc) return rc;
    const vd_config *g = &o->c.cfg;
    /* combinations whose second half would be silently ignored */
    if (o->want_summary && (o->want_min || o->trace || g->profile_out))
        return vd_errf(e, VD_EUSAGE, "--summary prints the net summary only; it takes no %s",
                       o->want_min ? "--min-budget" : o->trace ? "--trace" : "--profile-out");
    if (o->want_min && (g->budget || o->trace))
        return vd_errf(e, VD_EUSAGE, "--min-budget computes the budgets; it takes no %s",
                       g->budget ? "--budget" : "--trace");
    if (g->analytic && !g->backend)
        return vd_errf(e, VD_EUSAGE, "--analytic-profile chooses a backend's analytic "
                       "profile: give --backend (or --gpu-model for a device model)");
    return VD_OK;
}

/* stdout is buffered: a full disk shows only when it is flushed. */
static int flush_stdout(vd_err *e) {
    if (fflush(stdout) != 0 || ferror(stdout)) return vd_errf(e, VD_EIO, "write error");
    return VD_OK;
}

static int print_min_budgets(const vd_net *net, const vd_profile *prof, const vd_plan_opts *o,
                             bool json, vd_err *e) {
    uint64_t mins[VD_POLICY_COUNT] = {0};
    for (int k = 0; k < VD_POLICY_COUNT; k++) {
        vd_plan_opts mo = *o;
        mo.policy = (vd_policy)k;
        int rc = vd_plan_min_budget(net, prof, &mo, &mins[k], e);
        if (rc) return rc;
    }
    char b[32];
    if (json) {
        bool ok = true;
        json_t *mb = json_object();
        for (int k = 0; k < VD_POLICY_COUNT; k++)
            vd_json_set(mb, vd_policy_name((vd_policy)k), vd_json_uint(mins[k]), &ok);
        if (!ok) { json_decref(mb); mb = NULL; }
        json_t *r = json_pack("{s:o, s:i, s:s, s:o}", "net", vd_json_text(net->name), "batch",
                              o->batch, "prefetch", vd_prefetch_name(o->prefetch),
                              "min_budgets", mb);
        int rc = r ? vd_json_write(stdout, r, e) : vd_errf(e, VD_ENOMEM, "out of memory");
        json_decref(r);
        if (rc) return rc;
    } else {
        printf("minimum budgets for %s, batch %d (prefetch %s, profile %s)\n", net->name,
               o->batch, vd_prefetch_name(o->prefetch), prof->source);
        for (int k = 0; k < VD_POLICY_COUNT; k++)
            printf("  %-5s %12s  (%llu bytes)\n", vd_policy_name((vd_policy)k),
                   vd_fmt_bytes(mins[k], b, sizeof b), (unsigned long long)mins[k]);
    }
    return VD_OK;
}

/* --gpus N: the data-parallel part of the prediction (plan.h vd_plan_dp),
 * before the table (whose summary ends it). */
static void print_dp(const vd_plan *p) {
    const struct vd_dp_sim *d = &p->dp;
    if (d->ranks <= 1) return;
    char b[32];
    printf("data parallel: %d ranks, each with this plan at batch %d (global batch %d)\n"
           "  gradients %s in %d bucket%s (%d all-reduce call%s), ring all-reduce at %.0f GB/s "
           "bus bandwidth + %.0f us per call\n"
           "  all-reduce %.3f ms on its own stream, %.3f ms of it after the backward pass: "
           "predicted iteration %.4f s (one rank alone %.4f s)\n\n",
           d->ranks, p->batch, p->batch * d->ranks, vd_fmt_bytes(d->grad_bytes, b, sizeof b),
           d->n_buckets, d->n_buckets == 1 ? "" : "s", d->n_calls, d->n_calls == 1 ? "" : "s",
           d->bw / 1e9, d->lat_s * 1e6, 1e3 * d->allreduce_s, 1e3 * d->exposed_s, d->iter_s,
           p->sim.iter_s);
}

int main(int argc, char **argv) {
    /* The auto search builds and frees thousands of plans of the same sizes:
     * keep the freed heap (no trim, no per-plan mmap) instead of returning
     * it to the system and faulting it back in each build (a sixth of the
     * planning time on ResNet-50). */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    opts o;
    vd_err e = {0};
    int rc = parse_args(argc, argv, &o, &e);
    if (rc < 0) return 0;
    if (rc) return vd_cli_fail(PROG, &e);

    vd_net net;
    vd_net_init(&net);
    vd_session ses;
    memset(&ses, 0, sizeof ses);
    vd_profile mprof = {0};
    vd_plan plan;
    memset(&plan, 0, sizeof plan);
    vd_err pe = {0};
    int prc = VD_OK;
    vd_config_run run;
    if ((rc = vd_spec_load(o.c.spec, &net, &e))) goto out;
    /* batch, profile source, policy, budget: as vdnn-train (config/config.h) */
    if ((rc = vd_config_resolve(&o.c.cfg, &net, true, &run, &e))) goto out;
    if (o.want_summary) {
        if ((rc = vd_summary_write(stdout, &net, run.batch, o.json, &e))) goto out;
        rc = flush_stdout(&e);
        goto out;
    }

    const vd_profile *prof;
    if (run.use_backend) {
        rc = vd_session_open(&ses, &net, run.batch, &run.session, &e);
        if (rc) goto out;
        prof = &ses.prof;
        vd_config_budget(&run, &ses, NULL);
    } else {
        if ((rc = vd_config_model_profile(&run, &net, &mprof, &e))) goto out;
        if (run.session.profile_out && (rc = vd_profile_save(run.session.profile_out, &mprof, &e)))
            goto out;
        prof = &mprof;
        vd_config_budget(&run, NULL, prof);
    }

    if (o.want_min) {
        vd_cli_plan_progress(&run.plan, PROG, o.c.quiet);
        if ((rc = print_min_budgets(&net, prof, &run.plan, o.json, &e))) goto out;
        rc = flush_stdout(&e);
        goto out;
    }

    /* the plan vdnn-train makes: vd_session_plan with a backend */
    vd_cli_plan_progress(&run.plan, PROG, o.c.quiet);
    prc = run.use_backend ? vd_session_plan(&ses, &run.plan, &plan, &pe)
                          : vd_plan_build(&net, prof, &run.plan, &plan, &pe);
    if (prc && prc != VD_EBUDGET) { e = pe; rc = prc; goto out; }
    if (plan.steps && run.dp && (rc = vd_plan_dp(&plan, &net, prof, run.ranks, 0, &e))) goto out;
    if (plan.steps) {   /* VD_EBUDGET before planning leaves no plan to show */
        if (!o.json) print_dp(&plan);
        if (o.json) rc = vd_plan_write_json(stdout, &plan, &net, NULL, &e);
        else rc = vd_plan_write_table(stdout, &plan, &net, &e);
        if (!rc && o.trace) rc = vd_plan_write_trace(o.trace, &plan, &net, prof, &e);
        if (rc) goto out;
    }
    if ((rc = flush_stdout(&e))) goto out;
    if (prc) { e = pe; rc = prc; }
out:
    vd_plan_free(&plan);
    vd_profile_free(&mprof);
    vd_session_close(&ses);
    vd_net_free(&net);
    return rc ? vd_cli_fail(PROG, &e) : 0;
}
