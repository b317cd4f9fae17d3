/* vdnn_plan.c — vdnn-plan: show the memory plan vdnn-train would run.
 *
 *   vdnn-plan NET.yaml [--batch B] [--budget SIZE] [--policy P]
 *             [--prefetch auto|paper] [--profile F | --gpu-model CARD|cpu |
 *             --backend cpu|cuda|auto [--device N]] [--format table|json]
 *             [--trace FILE] [--profile-out FILE] [--min-budget] [--summary]
 *             [--help] [--version]
 *   vdnn-plan --list-gpu-models [--format table|json]
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
    char pol[160], nets[3 * PATH_MAX];
    vd_cli_policies(pol, sizeof pol);
    vd_cli_nets_help(nets, sizeof nets);
    fprintf(f,
        "usage: vdnn-plan NET.yaml|NAME [options]\n"
        "       vdnn-plan --list-gpu-models [--format json]\n"
        "\n"
        "Plan vDNN memory management for a net: which feature maps to offload to\n"
        "host memory (and when to prefetch them back) or to recompute in the\n"
        "backward pass, where every tensor lives in the device pool, and the\n"
        "predicted iteration time.\n"
        "%s"
        "\n"
        "options:\n"
        "  --batch B            batch size (default: the spec's train.batch, else 32;\n"
        "                       with --gpus N the global batch)\n"
        "  --gpus N             data parallel: plan one rank of N (batch B/N under\n"
        "                       --budget on its own GPU) and add the gradients'\n"
        "                       all-reduce, overlapped with the backward pass\n"
        "  --budget SIZE        device memory budget, e.g. 12G, 512M (default: the\n"
        "                       device's memory: all a CUDA device can give, the plan's\n"
        "                       own need on cpu, a card's memory less 640 MiB for the\n"
        "                       CUDA context and libraries; a cap: the plan's pool is\n"
        "                       what it needs)\n"
        "  --policy P           %s\n"
        "                       (none | all | conv | dyn: the paper's; auto: ours, per\n"
        "                       tensor keep/offload/recompute, searched with the\n"
        "                       simulator); default auto = none when the net fits\n"
        "  --prefetch M         auto (ours, from the profile) | paper (default auto)\n"
        "  --graph G            auto | on | off: how vdnn-train runs the iteration\n"
        "                       (replayed as a CUDA graph or op by op); a replayed plan\n"
        "                       that offloads nothing is predicted with the profile's\n"
        "                       graph_launch_s per op (default auto: as vdnn-train)\n"
        "  --optimizer O        sgd | adamw: the optimizer whose state the plan keeps\n"
        "                       and whose update it times (default: the spec's\n"
        "                       train.optimizer, else sgd; AdamW's state is twice SGD's)\n"
        "  --chunks K|L=K,...   split layers into K batch chunks: every layer that can be,\n"
        "                       or the named ones (a run of them shares its chunks);\n"
        "                       less memory per step (default: none split)\n"
        "  --freeze PATTERN     plan the training vdnn-train --freeze PATTERN runs: the\n"
        "                       parameters whose names match (POSIX extended regex,\n"
        "                       searched: '^layer[1-3]\\.') get no gradient, so their\n"
        "                       layers keep less for the backward pass\n"
        "  --profile FILE       measured/edited profile (JSON, see vdnn-plan(1))\n"
        "  --gpu-model M        plan for a card from its published figures (t4, l4,\n"
        "                       a10, a100-40g, a100-80g, rtx3060, rtx4060, rtx3090,\n"
        "                       rtx4090, h100-pcie, h100-sxm, h200, b200) or cpu\n"
        "                       (analytic profile; the default without --backend and\n"
        "                       --profile: h200). Given, the output ends with the\n"
        "                       answer for that card: fits or not, img/s, PCIe bytes,\n"
        "                       else the largest batch that fits\n"
        "  --list-gpu-models    the cards' figures and the rates derived from them\n"
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
        VD_CLI_LIST_NETS_HELP
        "\n"
        "backend (with --backend):\n"
        "%s"
        "\n"
        "exit status: 0 ok, 1 internal error, 2 usage, 3 spec, 4 io, 5 data,\n"
        "6 budget does not fit, 7 device, 8 unsupported, 9 out of memory\n",
        nets, pol, VD_CLI_BACKEND_HELP);
}

typedef struct opts {
    vd_cli_common c;
    bool json, want_min, want_summary, list_models;
    const char *trace;
} opts;

static const vd_cli_flag FLAGS[] = {
    {"batch", true}, {"gpus", true}, {"budget", true}, {"policy", true}, {"prefetch", true}, {"chunks", true},
    {"optimizer", true}, {"freeze", true},
    {"profile", true}, {"gpu-model", true}, {"backend", true}, {"device", true},
    {"analytic-profile", false}, {"math", true}, {"deterministic", false},
    {"no-stage-input", false}, {"graph", true}, {"conv-tune", true}, {"conv-api", true}, {"conv-split", true},
    {"conv-topk", true}, {"conv-rtc", false}, {"conv-debug", true}, {"no-fuse", false}, {"sync-debug", false},
    {"format", true}, {"trace", true}, {"profile-out", true}, {"save-profile", true},
    {"min-budget", false}, {"summary", false}, {"quiet", false}, {"list-gpu-models", false},
    {"help", false}, {"version", false}, {"list-nets", false},
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
    else if (!strcmp(name, "list-gpu-models")) o->list_models = o->c.no_spec = true;
    return rc;
}

/* Returns VD_OK, an error, or -1 for --help / --version (already printed). */
static int parse_args(int argc, char **argv, opts *o, vd_err *e) {
    memset(o, 0, sizeof *o);
    int rc = vd_cli_parse(argc, argv, PROG, usage, FLAGS, (int)VD_ARRAY_LEN(FLAGS), &o->c,
                          plan_flag, o, e);
    if (rc) return rc;
    const vd_config *g = &o->c.cfg;
    if (o->list_models && o->c.spec)
        return vd_errf(e, VD_EUSAGE, "--list-gpu-models lists the device models; it takes no "
                       "NET.yaml");
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
    int rc = vd_plan_min_budgets(net, prof, o, mins, e);
    if (rc) return rc;
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
        rc = r ? vd_json_write(stdout, r, e) : vd_errf(e, VD_ENOMEM, "out of memory");
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

/* ---- device models -------------------------------------------------------- */

/* x FLOP/s as TFLOP/s, "-" for 0 (none) */
static const char *tflops(double x, char *b, size_t n) {
    if (x > 0) snprintf(b, n, "%.1f", x / 1e12);
    else snprintf(b, n, "-");
    return b;
}

/* --list-gpu-models: the card table (profile.h vd_cards) and the rates the
 * model derives from it. */
static int list_models(bool json, vd_err *e) {
    if (json) {
        bool ok = true;
        json_t *arr = json_array();
        for (int i = 0; i < vd_n_cards; i++) {
            const vd_card *c = &vd_cards[i];
            const vd_device_params *d = &c->dev;
            uint64_t budget = d->mem_bytes - VD_DEVICE_CONTEXT_RESERVE;
            json_t *peak = json_pack("{s:o, s:o, s:o, s:o}", "fp32", vd_json_real(c->fp32),
                                     "tf32", vd_json_real(c->tf32), "fp16", vd_json_real(c->fp16),
                                     "bf16", vd_json_real(c->bf16));
            json_t *dev = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                                    "peak_flops", vd_json_real(d->peak_flops),
                                    "peak_flops_tf32", vd_json_real(d->peak_flops_tf32),
                                    "peak_flops_fp16", vd_json_real(d->peak_flops_fp16),
                                    "peak_flops_bf16", vd_json_real(d->peak_flops_bf16),
                                    "mem_bw", vd_json_real(d->mem_bw),
                                    "d2h_bw", vd_json_real(d->d2h_bw),
                                    "h2d_bw", vd_json_real(d->h2d_bw),
                                    "both_bw", vd_json_real(d->both_bw),
                                    "launch_s", vd_json_real(d->launch_s),
                                    "mem_bytes", vd_json_uint(d->mem_bytes),
                                    "allreduce_bw", vd_json_real(d->allreduce_bw),
                                    "allreduce_lat_s", vd_json_real(d->allreduce_lat_s));
            json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:i, s:o, s:o, s:o, s:o}",
                                  "name", vd_json_text(c->name),
                                  "product", vd_json_text(c->product),
                                  "memory_gb", vd_json_real(c->mem_gb),
                                  "memory_gib", vd_json_real(c->mem_gib),
                                  "mem_bw", vd_json_real(c->mem_bw), "peak_flops", peak,
                                  "pcie_gen", c->pcie_gen, "pcie_lanes", c->pcie_lanes,
                                  "nvlink_bw", vd_json_real(c->nvlink_bw),
                                  "source", vd_json_text(c->source), "device", dev,
                                  "default_budget", vd_json_uint(budget));
            vd_json_push(arr, o, &ok);
        }
        json_t *r = json_pack("{s:o, s:o}", "gpu_models", arr, "context_reserve",
                              vd_json_uint(VD_DEVICE_CONTEXT_RESERVE));
        int rc = r && ok ? vd_json_write(stdout, r, e) : vd_errf(e, VD_ENOMEM, "out of memory");
        json_decref(r);
        return rc;
    }
    char t[8][16];
    printf("device models for --gpu-model: published figures (dense peaks; tensor kinds with\n"
           "fp32 accumulation) and the rates the analytic model derives from them\n\n");
    printf("%-10s %-14s %6s  %-27s  %-5s  %-27s  %-11s  %s\n", "", "memory", "mem",
           "peak TFLOP/s", "PCIe", "model TFLOP/s", "copies GB/s", "");
    printf("%-10s %-14s %6s  %6s %6s %6s %6s  %-5s  %6s %6s %6s %6s  %5s %5s  %s\n", "name",
           "GB (GiB)", "GB/s", "fp32", "tf32", "fp16", "bf16", "link", "fp32", "tf32", "fp16",
           "bf16", "1-way", "both", "source");
    for (int i = 0; i < vd_n_cards; i++) {
        const vd_card *c = &vd_cards[i];
        const vd_device_params *d = &c->dev;
        char mem[24], link[8];
        snprintf(mem, sizeof mem, "%.0f (%.4g)", c->mem_gb, c->mem_gib);
        snprintf(link, sizeof link, "%dx%d", c->pcie_gen, c->pcie_lanes);
        printf("%-10s %-14s %6.0f  %6s %6s %6s %6s  %-5s  %6s %6s %6s %6s  %5.1f %5.1f  %s\n",
               c->name, mem, c->mem_bw / 1e9, tflops(c->fp32, t[0], 16), tflops(c->tf32, t[1], 16),
               tflops(c->fp16, t[2], 16), tflops(c->bf16, t[3], 16), link,
               tflops(d->peak_flops, t[4], 16), tflops(d->peak_flops_tf32, t[5], 16),
               tflops(d->peak_flops_fp16, t[6], 16), tflops(d->peak_flops_bf16, t[7], 16),
               d->h2d_bw / 1e9, d->both_bw / 1e9, c->source);
    }
    printf("\nmodel: fp32 at 60/67 of its peak, tensor kinds at 200/989.5 of theirs (never\n"
           "below fp32; the H200's measured rates), tf32 \"-\": plain fp32, bf16 \"-\": refused\n"
           "(use --math fp16); pinned copies per PCIe lane 0.78 GB/s (gen3), 1.56 (gen4),\n"
           "3.44 (gen5) each way, 1.8x that both ways at once; memory bandwidth as published;\n"
           "default budget: the memory less %llu MiB (CUDA context, cuDNN/cuBLAS handles).\n"
           "cpu: the 2-core CPU model (20 GFLOP/s, 10 GB/s, no memory limit).\n",
           (unsigned long long)(VD_DEVICE_CONTEXT_RESERVE >> 20));
    return VD_OK;
}

/* The answer for an explicit --gpu-model card: does the plan fit, how fast,
 * how many bytes cross PCIe; when it does not fit, the largest batch that
 * does (vd_config_largest_batch) and its plan's speed. */
typedef struct card_answer {
    bool fits;
    double iter_s, img_s;       /* fits: the plan's predicted iteration, images/s */
    uint64_t pcie_bytes;        /* fits: offloads + prefetches + input per iteration */
    int largest;                /* !fits: largest global batch that fits (0: none) */
    double largest_img_s;       /* its predicted images/s */
    uint64_t largest_pcie;
} card_answer;

static uint64_t pcie_bytes(const vd_plan *p) {
    return p->offload_bytes + p->prefetch_bytes + p->input_bytes;
}

static double plan_iter_s(const vd_plan *p) {
    return p->dp.ranks > 1 ? p->dp.iter_s : p->sim.iter_s;
}

static int card_answer_make(const vd_config_run *run, const vd_net *net, const vd_plan *plan,
                            bool fits, card_answer *a, vd_err *e) {
    memset(a, 0, sizeof *a);
    a->fits = fits;
    if (fits) {
        a->iter_s = plan_iter_s(plan);
        a->img_s = (double)run->batch * run->ranks / a->iter_s;
        a->pcie_bytes = pcie_bytes(plan);
        return VD_OK;
    }
    int b = 0;
    int rc = vd_config_largest_batch(run, net, run->batch, &b, e);
    if (rc || b == 0) return rc;
    a->largest = b * run->ranks;
    vd_profile p;
    if ((rc = vd_profile_analytic(net, b, run->model, &p, e))) return rc;
    vd_plan_opts o = run->plan;
    o.batch = b;
    o.progress = NULL;
    vd_plan q;
    rc = vd_plan_build(net, &p, &o, &q, e);
    bool built = rc == VD_OK || rc == VD_EBUDGET;   /* an infeasible plan is still one */
    if (rc == VD_EBUDGET) rc = VD_OK;   /* cannot be (vd_plan_fits said it fits): no figures */
    else if (!rc && run->dp) rc = vd_plan_dp(&q, net, &p, run->ranks, 0, e);
    if (!rc && q.feasible) {
        a->largest_img_s = (double)a->largest / plan_iter_s(&q);
        a->largest_pcie = pcie_bytes(&q);
    }
    if (built) vd_plan_free(&q);
    vd_profile_free(&p);
    return rc;
}

static void card_answer_print(const vd_config_run *run, const vd_net *net, const card_answer *a) {
    const vd_card *c = run->card;
    char b1[32], b2[32];
    printf("\non %s (%s): budget %s", c->name, c->product,
           vd_fmt_bytes(run->plan.budget, b1, sizeof b1));
    if (run->budget_given) printf(" (--budget)\n");
    else printf(" = %s less %llu MiB for the CUDA context and libraries\n",
                vd_fmt_bytes(c->dev.mem_bytes, b2, sizeof b2),
                (unsigned long long)(VD_DEVICE_CONTEXT_RESERVE >> 20));
    printf("  batch %d, %s%s, policy %s: ", run->batch * run->ranks,
           vd_math_name(net->train.math),
           net->train.optimizer == VD_OPT_ADAMW ? ", adamw" : "", vd_policy_name(run->plan.policy));
    if (a->fits) {
        printf("fits; predicted %.1f img/s (%.4f s/iteration), %.2f GB over PCIe per "
               "iteration\n", a->img_s, a->iter_s, (double)a->pcie_bytes / 1e9);
    } else if (a->largest > 0) {
        printf("does not fit; the largest batch that fits is %d: predicted %.1f img/s, "
               "%.2f GB over PCIe per iteration\n", a->largest, a->largest_img_s,
               (double)a->largest_pcie / 1e9);
    } else {
        printf("does not fit, nor does any smaller batch\n");
    }
}

/* The answer as the plan JSON's object "gpu_model". */
static json_t *card_answer_json(const vd_config_run *run, const vd_net *net, const card_answer *a) {
    const vd_card *c = run->card;
    bool ok = true;
    json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:b, s:i, s:o, s:o, s:b}",
                          "name", vd_json_text(c->name), "product", vd_json_text(c->product),
                          "memory_bytes", vd_json_uint(c->dev.mem_bytes),
                          "context_reserve", vd_json_uint(VD_DEVICE_CONTEXT_RESERVE),
                          "budget", vd_json_uint(run->plan.budget),
                          "budget_given", run->budget_given, "batch", run->batch * run->ranks,
                          "math", vd_json_text(vd_math_name(net->train.math)),
                          "policy", vd_json_text(vd_policy_name(run->plan.policy)),
                          "fits", a->fits);
    if (a->fits) {
        vd_json_set(o, "img_per_s", vd_json_real(a->img_s), &ok);
        vd_json_set(o, "iter_s", vd_json_real(a->iter_s), &ok);
        vd_json_set(o, "pcie_bytes", vd_json_uint(a->pcie_bytes), &ok);
    } else {
        vd_json_set(o, "largest_batch", json_integer(a->largest), &ok);
        if (a->largest > 0) {
            vd_json_set(o, "largest_batch_img_per_s", vd_json_real(a->largest_img_s), &ok);
            vd_json_set(o, "largest_batch_pcie_bytes", vd_json_uint(a->largest_pcie), &ok);
        }
    }
    if (!ok) { json_decref(o); return NULL; }
    return o;
}

/* What one vdnn-plan run holds. */
typedef struct job {
    vd_net net;
    vd_config_run run;
    vd_session ses;             /* run.use_backend */
    vd_profile mprof;           /* a device model's (or --profile's) profile */
    const vd_profile *prof;     /* the one planned with */
    vd_plan plan;
} job;

/* The profile: a backend's session, or a device model's; and the budget. */
static int get_profile(job *j, vd_err *e) {
    vd_config_run *run = &j->run;
    int rc;
    if (run->use_backend) {
        rc = vd_session_open(&j->ses, &j->net, run->batch, &run->session, e);
        if (!rc) rc = vd_cli_stop_check("after profiling", e);
        if (rc) return rc;
        j->prof = &j->ses.prof;
        vd_config_budget(run, &j->ses, NULL);
        return VD_OK;
    }
    if ((rc = vd_config_model_profile(run, &j->net, &j->mprof, e))) return rc;
    if (run->session.profile_out && (rc = vd_profile_save(run->session.profile_out, &j->mprof, e)))
        return rc;
    j->prof = &j->mprof;
    vd_config_budget(run, NULL, j->prof);
    return VD_OK;
}

/* The plan vdnn-train makes (vd_session_plan with a backend), printed as a
 * table or JSON, with --trace; a plan over the budget is shown, then its
 * VD_EBUDGET returned. */
static int plan_and_print(job *j, const opts *o, vd_err *e) {
    vd_config_run *run = &j->run;
    vd_plan *plan = &j->plan;
    vd_err pe = {0};
    vd_cli_plan_progress(&run->plan, PROG, o->c.quiet);
    int rc, prc = run->use_backend ? vd_session_plan(&j->ses, &run->plan, plan, &pe)
                                   : vd_plan_build(&j->net, j->prof, &run->plan, plan, &pe);
    if (prc && prc != VD_EBUDGET) { *e = pe; return prc; }
    if ((rc = vd_cli_stop_check("while planning", e))) return rc;
    if (plan->steps && run->dp &&
        (rc = vd_plan_dp(plan, &j->net, j->prof, run->ranks, 0, e)))
        return rc;
    /* the lower bound at the budget, for the table and the JSON */
    if (plan->steps &&
        (rc = vd_plan_copy_bound(&j->net, j->prof, plan, run->plan.budget, &plan->bound, e)))
        return rc;
    /* an explicit --gpu-model card: the answer for it (fits, speed, PCIe
     * bytes; else the largest batch that fits) */
    card_answer ans;
    bool answer = o->c.cfg.gpu_model && run->card && !run->use_backend &&
                  (prc == VD_OK || (prc == VD_EBUDGET && plan->steps));
    if (answer && (rc = card_answer_make(run, &j->net, plan, prc == VD_OK, &ans, e))) return rc;
    if (plan->steps) {   /* VD_EBUDGET before planning leaves no plan to show */
        if (!o->json) print_dp(plan);
        if (o->json) {
            json_t *js = vd_plan_json(plan, &j->net, NULL);
            bool ok = js != NULL;
            if (ok && answer) vd_json_set(js, "gpu_model", card_answer_json(run, &j->net, &ans), &ok);
            rc = ok ? vd_json_write(stdout, js, e)
                    : vd_errf(e, VD_ENOMEM, "out of memory writing the plan as JSON");
            json_decref(js);
        } else {
            rc = vd_plan_write_table(stdout, plan, &j->net, e);
            if (!rc && answer) card_answer_print(run, &j->net, &ans);
        }
        if (!rc && o->trace) rc = vd_plan_write_trace(o->trace, plan, &j->net, j->prof, e);
        if (rc) return rc;
    }
    if ((rc = flush_stdout(e))) return rc;
    if (prc) *e = pe;
    return prc;
}

static int run_job(job *j, const opts *o, vd_err *e) {
    vd_run_path rp = { .flag = "--trace", .path = o->trace, .output = true };
    int rc = vd_cli_check_paths(&o->c, &rp, 1, e);
    if (rc) return rc;
    /* SIGINT, SIGTERM, SIGHUP: profiling and the plan searches stop at their
     * next check (exit 128 + the signal), nothing half written */
    volatile sig_atomic_t *stop = vd_cli_catch_stop();
    if ((rc = vd_spec_load(o->c.spec, &j->net, e))) return rc;
    /* batch, profile source, policy, budget: as vdnn-train (config/config.h) */
    if ((rc = vd_config_resolve(&o->c.cfg, &j->net, true, &j->run, e))) return rc;
    j->run.session.backend_opts.stop = stop;
    if (o->want_summary) {
        rc = vd_summary_write(stdout, &j->net, j->run.batch, o->json, e);
        return rc ? rc : flush_stdout(e);
    }
    if ((rc = get_profile(j, e))) return rc;
    if (!o->want_min) return plan_and_print(j, o, e);
    vd_cli_plan_progress(&j->run.plan, PROG, o->c.quiet);
    rc = print_min_budgets(&j->net, j->prof, &j->run.plan, o->json, e);
    return rc ? rc : flush_stdout(e);
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
    if (o.list_models) {
        rc = list_models(o.json, &e);
        if (!rc) rc = flush_stdout(&e);
        return rc ? vd_cli_fail(PROG, &e) : 0;
    }
    job j;
    memset(&j, 0, sizeof j);
    vd_net_init(&j.net);
    rc = run_job(&j, &o, &e);
    vd_plan_free(&j.plan);
    vd_profile_free(&j.mprof);
    vd_session_close(&j.ses);
    vd_config_run_free(&j.run);
    vd_net_free(&j.net);
    return rc == VD_ESTOP ? vd_cli_stopped(PROG, &e) : rc ? vd_cli_fail(PROG, &e) : 0;
}
