/* config.h — one configuration for vdnn-train, vdnn-plan and vdnn-bench.
 *
 * The tools parse their command lines into a vd_config (what the user
 * gave) and call vd_config_resolve, which applies it over the spec's
 * train: section and the defaults, the same way for every tool:
 *
 *   batch    --batch, else the spec's train.batch, else 32
 *   backend  --backend (cpu | cuda | auto; default auto = cuda when this build
 *            has it and a device is present); --device N is the CUDA device
 *            index in every tool
 *   profile  --profile FILE, else measured on CUDA (unless --analytic-profile),
 *            else the backend's analytic profile (vd_profile_backend: the
 *            algorithm options and aux bytes the backend will really use).
 *            vdnn-plan without --backend plans for a device model instead
 *            (--gpu-model CARD | cpu, default h200: vd_cards; vd_profile_analytic)
 *   policy   --policy, else auto (none when the net fits, else the fastest plan)
 *   budget   --budget, else: CUDA all the device can give, cpu the plan's own
 *            need, a device model its memory less VD_DEVICE_CONTEXT_RESERVE
 *            (vd_config_budget), as a cap
 *            only: the pool is then what the plan needs (pool_to_need)
 *   lr       the spec's train.lr (over which vdnn-train's --lr goes), else
 *            VD_DEFAULT_LR
 *   math     --math fp32 | tf32 | bf16 | fp16, else the spec's train.math, else
 *            fp32 (bf16 on a card without bf16 is VD_EUNSUPPORTED);
 *            --deterministic
 *   optimizer --optimizer sgd | adamw, else the spec's train.optimizer, else
 *            sgd (the planner counts its state; vdnn-train's --nesterov,
 *            --betas and --eps are its own, config/train_job.h)
 *   backend options (--conv-*, --sync-debug), input staging (--no-stage-input),
 *            the memory trace and step times (vdnn-train)
 *
 * so that `vdnn-plan --backend cpu` prints exactly the plan that
 * `vdnn-train --backend cpu` runs (both open a vd_session from the resolved
 * options and plan with vd_session_plan). */
#ifndef VD_CONFIG_H
#define VD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include "util/util.h"
#include "net/net.h"
#include "backend/backend.h"
#include "plan/plan.h"
#include "train/session.h"

#define VD_CONFIG_DEFAULT_BATCH 32       /* neither --batch nor train.batch */

typedef struct vd_config {
    int64_t batch;              /* --batch; 0 = not given */
    const char *backend;        /* --backend cpu | cuda | auto; NULL = not given (auto) */
    int device;                 /* --device: CUDA device index */
    const char *gpu_model;      /* --gpu-model: analytic device model (vdnn-plan
                                   without --backend); NULL = h200 */
    const char *profile;        /* --profile FILE */
    const char *profile_out;    /* --profile-out FILE */
    bool analytic;              /* --analytic-profile */
    bool has_policy;            /* --policy given */
    vd_policy policy;
    uint64_t budget;            /* --budget; 0 = not given */
    vd_math math;               /* --math */
    bool has_math;              /* --math given (else the spec's train.math) */
    vd_optimizer optimizer;     /* --optimizer */
    bool has_optimizer;         /* --optimizer given (else the spec's train.optimizer) */
    bool deterministic;         /* --deterministic */
    vd_prefetch prefetch;       /* --prefetch */
    bool no_stage_input;        /* --no-stage-input */
    vd_backend_opts backend_opts; /* --conv-tune, --conv-api, --conv-split,
                                   --conv-debug, --conv-topk, --conv-rtc, --no-fuse,
                                   --sync-debug */
    bool mem_trace;             /* --mem-trace (vdnn-train) */
    bool step_times;            /* --step-times (vdnn-train) */
    bool has_graph;             /* --graph given (vdnn-train, vdnn-bench) */
    vd_graph_mode graph;        /* its captured iterations (else auto) */
    int gpus;                   /* --gpus N: data-parallel ranks; 0 = not given (1) */
    const char *chunks;         /* --chunks K | LAYER=K,...: split layers; NULL = none */
    const char *freeze;         /* --freeze PATTERN: frozen parameters (vd_net_freeze);
                                   NULL = none */
} vd_config;

/* Nothing given: backend auto, device 0, fp32, prefetch auto. */
void vd_config_init(vd_config *c);

/* What a configuration resolves to. */
typedef struct vd_config_run {
    int batch;
    bool use_backend;           /* plan from a session's profile (vd_session_open with
                                   session); false: vdnn-plan's device model */
    const vd_device_params *model;   /* !use_backend: the device model */
    const vd_card *card;        /* !use_backend: the model's card (NULL: cpu) */
    vd_session_opts session;    /* backend, device, math, determinism, profile
                                   source, backend options, trace, step times */
    vd_plan_opts plan;          /* batch, policy, prefetch, staging; budget: the
                                   given one, else 0 until vd_config_budget */
    bool budget_given;          /* --budget */
    /* Data parallel (--gpus N): ranks = N (1 without --gpus), dp = --gpus was
     * given (even 1: the run goes through the all-reduce path). batch (and
     * plan.batch) is then one rank's shard, the global batch / N; the global
     * batch is net->train.batch. */
    int ranks;
    bool dp;
    int *chunks;                /* --chunks: [n_layers], plan.chunks (NULL: none); owned */
} vd_config_run;

/* Free what vd_config_resolve allocated in r (safe on a zeroed r). */
void vd_config_run_free(vd_config_run *r);

/* Resolve c for net: the batch (above) is applied to net->train.batch and
 * net is finalized at it and vd_schedule_inplace'd; r is filled. With
 * --freeze is applied to net (vd_net_freeze: before the in-place schedule,
 * which depends on what the backward pass reads). With
 * --gpus N the batch is the global one: r->batch = batch / N, and a batch
 * that N does not divide is VD_ESPEC (each rank needs a whole shard).
 * plan_tool: vdnn-plan, which plans for a device model unless --backend
 * is given (train and bench always use a backend). Errors: VD_EUSAGE
 * (exclusive flags: --profile with --analytic-profile or --gpu-model,
 * a --freeze pattern that is no regular expression or matches no parameter,
 * --gpu-model with --backend, an unknown model: the message lists the known
 * ones and the nearest; --chunks that is no count nor LAYER=K list, names
 * no layer of the net, or splits what cannot be split:
 * vd_plan_chunks_check), VD_EUNSUPPORTED (--math bf16 on a card without
 * bf16), the spec's. r->chunks is r's (vd_config_run_free). */
int vd_config_resolve(const vd_config *c, vd_net *net, bool plan_tool, vd_config_run *r,
                      vd_err *e);

/* The profile of a run without a backend (!r->use_backend): --profile FILE,
 * else the analytic profile of r->model. */
int vd_config_model_profile(const vd_config_run *r, const vd_net *net, vd_profile *p, vd_err *e);

/* Set r->plan.budget when no --budget was given: with a session (s non-NULL)
 * vd_session_default_budget (CUDA: all the device can give; cpu: 0 = the
 * plan's own need), else the profile's device memory (prof->dev.mem_bytes,
 * 0 for the cpu model); and r->plan.pool_to_need: that budget is a cap,
 * the pool what the plan needs. */
void vd_config_budget(vd_config_run *r, const vd_session *s, const vd_profile *prof);

/* The largest batch per rank below hi whose plan fits r->plan.budget on the
 * device model (!r->use_backend, no --profile): bisection over the batch,
 * each probe the model's analytic profile at that batch and vd_plan_fits
 * with r->plan's policy and options; the first probe is batch 1. *out: the
 * batch b with b fitting and b + 1 not (b + 1 = hi is taken as not
 * fitting, unprobed), 0 when batch 1 does not fit. Assumes that a batch
 * that fits fits at every smaller one (the plans' memory grows with the
 * batch). VD_EUSAGE without a device model or a budget. */
int vd_config_largest_batch(const vd_config_run *r, const vd_net *net, int hi, int *out,
                            vd_err *e);

#endif
