/* vdnn_plan.c — vdnn-plan: show the memory plan vdnn-train would run.
 *
 *   vdnn-plan NET.yaml [--batch B] [--budget SIZE] [--policy P]
 *             [--prefetch auto|paper] [--profile F | --device h200|cpu]
 *             [--format table|json] [--trace FILE] [--save-profile FILE]
 *             [--min-budget] [--summary] [--help] [--version]
 *
 * Documented in man/vdnn-plan.1. Only this file prints and exits. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli_common.h"
#include "net/net.h"
#include "plan/plan.h"
#include "spec/spec.h"
#include "spec/summary.h"
#include "util/json.h"

static const char *const PROG = "vdnn-plan";

static void usage(FILE *f) {
    fprintf(f,
        "usage: vdnn-plan NET.yaml [options]\n"
        "\n"
        "Plan vDNN memory management for a net: which feature maps to offload to\n"
        "host memory (and when to prefetch them back) or to recompute in the\n"
        "backward pass, where every tensor lives in the device pool, and the\n"
        "predicted iteration time.\n"
        "\n"
        "options:\n"
        "  --batch B            batch size (default: the spec's train.batch)\n"
        "  --budget SIZE        device memory budget, e.g. 12G, 512M (default: the\n"
        "                       device's memory for h200, the plan's own peak for cpu)\n"
        "  --policy P           none | all | conv | dyn (the paper's) | auto (ours:\n"
        "                       per tensor keep/offload/recompute, searched with the\n"
        "                       simulator); default auto with --budget, else none\n"
        "  --prefetch M         auto (ours, from the profile) | paper (default auto)\n"
        "  --profile FILE       measured/edited profile (JSON, see vdnn-plan(1))\n"
        "  --device D           analytic profile for h200 | cpu (default h200)\n"
        "  --format F           table | json (default table)\n"
        "  --trace FILE         write a Chrome trace (open in Perfetto / chrome://tracing)\n"
        "  --save-profile FILE  write the profile used, as JSON\n"
        "  --min-budget         print the smallest budget of every policy\n"
        "  --summary            print the per-layer net summary and exit\n"
        "  --help, --version\n"
        "\n"
        "exit status: 0 ok, 1 internal error, 2 usage, 3 spec, 4 io, 5 data,\n"
        "6 budget does not fit, 7 device, 8 unsupported, 9 out of memory\n");
}

static int usage_err(const char *fmt, const char *arg) {
    fprintf(stderr, "%s: ", PROG);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'vdnn-plan --help'.\n");
    return VD_EUSAGE;
}

int main(int argc, char **argv) {
    enum { O_BATCH = 256, O_BUDGET, O_POLICY, O_PREFETCH, O_PROFILE, O_DEVICE, O_FORMAT, O_TRACE,
           O_MIN, O_SUMMARY, O_HELP, O_VERSION, O_SAVEPROF };
    static const struct option longopts[] = {
        {"batch", required_argument, 0, O_BATCH},
        {"budget", required_argument, 0, O_BUDGET},
        {"policy", required_argument, 0, O_POLICY},
        {"prefetch", required_argument, 0, O_PREFETCH},
        {"profile", required_argument, 0, O_PROFILE},
        {"device", required_argument, 0, O_DEVICE},
        {"format", required_argument, 0, O_FORMAT},
        {"trace", required_argument, 0, O_TRACE},
        {"save-profile", required_argument, 0, O_SAVEPROF},
        {"min-budget", no_argument, 0, O_MIN},
        {"summary", no_argument, 0, O_SUMMARY},
        {"help", no_argument, 0, O_HELP},
        {"version", no_argument, 0, O_VERSION},
        {0, 0, 0, 0},
    };
    vd_err e = {0};
    int64_t batch = 0;
    uint64_t budget = 0;
    bool have_budget = false, json = false, want_min = false, want_summary = false;
    vd_policy policy = VD_POLICY_NONE;
    bool have_policy = false;
    vd_prefetch prefetch = VD_PREFETCH_AUTO;
    const char *profile_path = NULL, *device = NULL, *trace_path = NULL, *save_prof = NULL;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_BATCH:
            if (vd_parse_i64(optarg, &batch, &e) || batch <= 0 || batch > (1 << 24))
                return usage_err("--batch: '%s' is not a batch size (1..16777216)", optarg);
            break;
        case O_BUDGET:
            if (vd_parse_size(optarg, &budget, &e) || budget == 0)
                return usage_err("--budget: '%s' is not a size (e.g. 12G, 512M, 1.5G)", optarg);
            have_budget = true;
            break;
        case O_POLICY:
            if (vd_policy_parse(optarg, &policy, &e)) return vd_cli_fail(PROG, &e);
            have_policy = true;
            break;
        case O_PREFETCH:
            if (vd_prefetch_parse(optarg, &prefetch, &e)) return vd_cli_fail(PROG, &e);
            break;
        case O_PROFILE: profile_path = optarg; break;
        case O_DEVICE:
            if (!vd_device_find(optarg))
                return usage_err("--device: unknown device '%s' (expected h200 or cpu)", optarg);
            device = optarg;
            break;
        case O_FORMAT:
            if (strcmp(optarg, "json") == 0) json = true;
            else if (strcmp(optarg, "table") == 0) json = false;
            else return usage_err("--format: '%s' (expected table or json)", optarg);
            break;
        case O_TRACE: trace_path = optarg; break;
        case O_SAVEPROF: save_prof = optarg; break;
        case O_MIN: want_min = true; break;
        case O_SUMMARY: want_summary = true; break;
        case 'h': case O_HELP: usage(stdout); return 0;
        case O_VERSION: vd_cli_version(PROG); return 0;
        default:
            /* a long option without its value, or a flag given one:
             * getopt_long sets optopt to its val (>= O_BATCH), not a character */
            if (optopt >= O_BATCH)
                return usage_err(strchr(argv[optind - 1], '=') ? "option '%s' takes no value"
                                                                 : "option '%s' needs a value",
                                 argv[optind - 1]);
            if (optopt) {
                char o[2] = {(char)optopt, 0};
                return usage_err("option '-%s' needs an argument or is unknown", o);
            }
            return usage_err("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return usage_err("%s", optind >= argc ? "expected one NET.yaml argument"
                                              : "expected exactly one NET.yaml argument");
    if (profile_path && device)
        return usage_err("%s", "--profile and --device are mutually exclusive");
    /* combinations whose second half would be silently ignored */
    if (want_summary && (want_min || trace_path || save_prof))
        return usage_err("--summary prints the net summary only; it takes no %s",
                         want_min ? "--min-budget" : trace_path ? "--trace" : "--save-profile");
    if (want_min && (have_budget || trace_path))
        return usage_err("--min-budget computes the budgets; it takes no %s",
                         have_budget ? "--budget" : "--trace");
    const char *spec = argv[optind];

    vd_net net;
    vd_net_init(&net);
    int rc = vd_spec_load(spec, &net, &e);
    if (rc) { vd_net_free(&net); return vd_cli_fail(PROG, &e); }
    if (batch == 0) batch = net.train.batch;
    if (batch <= 0) {
        vd_net_free(&net);
        return usage_err("%s: the spec sets no train.batch; pass --batch", spec);
    }
    if (net.train.batch != batch) {
        net.train.batch = (int)batch;
        if ((rc = vd_net_finalize(&net, &e))) { vd_net_free(&net); return vd_cli_fail(PROG, &e); }
    }
    if (want_summary) {
        rc = vd_summary_write(stdout, &net, (int)batch, json, &e);
        vd_net_free(&net);
        return rc ? vd_cli_fail(PROG, &e) : 0;
    }

    vd_profile prof = {0};
    if (profile_path) rc = vd_profile_load(profile_path, &net, (int)batch, &prof, &e);
    else rc = vd_profile_analytic(&net, (int)batch, vd_device_find(device ? device : "h200"), &prof, &e);
    if (rc) { vd_net_free(&net); return vd_cli_fail(PROG, &e); }
    if (save_prof && (rc = vd_profile_save(save_prof, &prof, &e))) goto fail;
    if (!have_budget) budget = prof.dev.mem_bytes;   /* 0 = the plan's own peak */
    if (!have_policy && have_budget) policy = VD_POLICY_AUTO;

    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = (int)batch;
    o.policy = policy;
    o.prefetch = prefetch;
    o.budget = budget;
    o.no_stage_input = !vd_cli_stage_input();

    uint64_t mins[VD_POLICY_COUNT] = {0};
    if (want_min) {
        for (int k = 0; k < VD_POLICY_COUNT; k++) {
            vd_plan_opts mo = o;
            mo.policy = (vd_policy)k;
            if ((rc = vd_plan_min_budget(&net, &prof, &mo, &mins[k], &e))) goto fail;
        }
        char b[32];
        if (json) {
            bool ok = true;
            json_t *mb = json_object();
            for (int k = 0; k < VD_POLICY_COUNT; k++)
                vd_json_set(mb, vd_policy_name((vd_policy)k), vd_json_uint(mins[k]), &ok);
            if (!ok) { json_decref(mb); mb = NULL; }
            json_t *r = json_pack("{s:o, s:i, s:s, s:o}", "net", vd_json_text(net.name), "batch",
                                  (int)batch, "prefetch", vd_prefetch_name(prefetch),
                                  "min_budgets", mb);
            rc = r ? vd_json_write(stdout, r, &e) : vd_errf(&e, VD_ENOMEM, "out of memory");
            json_decref(r);
            if (rc) goto fail;
        } else {
            printf("minimum budgets for %s, batch %d (prefetch %s, profile %s)\n", net.name,
                   (int)batch, vd_prefetch_name(prefetch), prof.source);
            for (int k = 0; k < VD_POLICY_COUNT; k++)
                printf("  %-5s %12s  (%llu bytes)\n", vd_policy_name((vd_policy)k),
                       vd_fmt_bytes(mins[k], b, sizeof b), (unsigned long long)mins[k]);
        }
        vd_profile_free(&prof);
        vd_net_free(&net);
        /* stdout is buffered: a full disk shows only when it is flushed */
        if (fflush(stdout) != 0 || ferror(stdout)) {
            vd_errf(&e, VD_EIO, "write error");
            return vd_cli_fail(PROG, &e);
        }
        return 0;
    }

    vd_plan plan;
    vd_err pe = {0};
    int prc = vd_plan_build(&net, &prof, &o, &plan, &pe);
    if (prc && prc != VD_EBUDGET) { e = pe; rc = prc; goto fail; }
    if (json) rc = vd_plan_write_json(stdout, &plan, &net, NULL, &e);
    else rc = vd_plan_write_table(stdout, &plan, &net, &e);
    if (!rc && trace_path) rc = vd_plan_write_trace(trace_path, &plan, &net, &prof, &e);
    vd_plan_free(&plan);
    if (rc) goto fail;
    vd_profile_free(&prof);
    vd_net_free(&net);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        vd_errf(&e, VD_EIO, "write error");
        return vd_cli_fail(PROG, &e);
    }
    if (prc) return vd_cli_fail(PROG, &pe);
    return 0;
fail:
    vd_profile_free(&prof);
    vd_net_free(&net);
    return vd_cli_fail(PROG, &e);
}
